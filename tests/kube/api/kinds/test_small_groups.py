"""policy/v1 PodDisruptionBudget and Eviction, scheduling.k8s.io/v1 PriorityClass,
discovery.k8s.io/v1 EndpointSlice and storage.k8s.io/v1 StorageClass: defaults, validation,
printer cells and registration."""

from __future__ import annotations

from typing import Any

import pytest

from kube.api import walk
from kube.api.codec import from_builtins, to_builtins
from kube.api.errors import ErrorType
from kube.api.kinds.discovery_v1 import EndpointSlice
from kube.api.kinds.policy_v1 import Eviction, PodDisruptionBudget
from kube.api.kinds.scheduling_v1 import PriorityClass
from kube.api.kinds.storage_v1 import StorageClass
from kube.api.scheme import NOT_SERVED
from tests.kube.api.kinds.helpers import (
    CREATED,
    DUPLICATE,
    FORBIDDEN,
    INVALID,
    NOT_SUPPORTED,
    REQUIRED,
    TOO_LONG,
    TOO_MANY,
    cells,
    decode,
    merge,
    ordered,
    problems,
    update_problems,
)

# policy/v1.

PDB: dict[str, Any] = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": "web", "namespace": "default", "creationTimestamp": CREATED},
    "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
}


def pdb(**spec: Any) -> dict[str, Any]:
    return merge(PDB, {"spec": {"minAvailable": None, **spec}})


PDB_CASES: list[tuple[str, dict[str, Any], list[tuple[str, ErrorType]]]] = [
    ("valid-min", PDB, []),
    ("valid-max-percent", pdb(maxUnavailable="25%", unhealthyPodEvictionPolicy="AlwaysAllow"), []),
    ("valid-neither", pdb(), []),
    ("both", pdb(minAvailable=1, maxUnavailable=1), [("spec", INVALID)]),
    ("negative", pdb(minAvailable=-1), [("spec.minAvailable", INVALID)]),
    ("not-percent", pdb(maxUnavailable="half"), [("spec.maxUnavailable", INVALID)]),
    ("over-100", pdb(minAvailable="150%"), [("spec.minAvailable", INVALID)]),
    (
        "policy",
        pdb(unhealthyPodEvictionPolicy="Never"),
        [("spec.unhealthyPodEvictionPolicy", NOT_SUPPORTED)],
    ),
    (
        "selector",
        pdb(selector={"matchLabels": {"app": "bad value"}}),
        [("spec.selector.matchLabels", INVALID)],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in PDB_CASES], ids=[c[0] for c in PDB_CASES]
)
def test_pdb_validation(raw: dict[str, Any], expected: list[tuple[str, ErrorType]]) -> None:
    assert problems(decode(raw, PodDisruptionBudget)) == ordered(expected)


def test_pdb_both_set_message() -> None:
    errors = walk.validate(decode(pdb(minAvailable=1, maxUnavailable="10%"), PodDisruptionBudget))
    assert [e.detail for e in errors] == ["minAvailable and maxUnavailable cannot be both set"]


PDB_CELLS: list[tuple[str, dict[str, Any], list[Any]]] = [
    ("min", merge(PDB, {"status": {"disruptionsAllowed": 1}}), ["web", "2", "N/A", 1, "5m"]),
    ("max-percent", pdb(maxUnavailable="25%"), ["web", "N/A", "25%", 0, "5m"]),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in PDB_CELLS], ids=[c[0] for c in PDB_CELLS]
)
def test_pdb_cells(raw: dict[str, Any], expected: list[Any]) -> None:
    assert cells(decode(raw, PodDisruptionBudget)) == expected


def test_policy_registrations() -> None:
    info = PodDisruptionBudget.kind_info
    assert (info.short_names, info.subresources) == (("pdb",), ("status",))
    assert [c.name for c in info.columns] == [
        "Name",
        "Min Available",
        "Max Unavailable",
        "Allowed Disruptions",
        "Age",
    ]
    # Only the pods/eviction subresource takes one: no top-level resource in discovery.
    eviction = Eviction.kind_info
    assert (eviction.group, eviction.plural, eviction.verbs) == ("policy", "evictions", NOT_SERVED)


def test_eviction_round_trips() -> None:
    raw = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "web-0", "namespace": "default"},
        "deleteOptions": {"gracePeriodSeconds": 30},
    }
    obj = decode(raw, Eviction)
    assert walk.validate(obj) == []
    assert to_builtins(obj)["deleteOptions"]["gracePeriodSeconds"] == 30


# scheduling.k8s.io/v1.

PRIORITY_CLASS: dict[str, Any] = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "high", "creationTimestamp": CREATED},
    "value": 1000000,
    "description": "Important services.",
}


def priority_class(**patch: Any) -> dict[str, Any]:
    return merge(PRIORITY_CLASS, patch)


def test_priority_class_defaults() -> None:
    assert to_builtins(decode(PRIORITY_CLASS, PriorityClass))["preemptionPolicy"] == (
        "PreemptLowerPriority"
    )
    never = decode(priority_class(preemptionPolicy="Never"), PriorityClass)
    assert never.preemption_policy == "Never"


PRIORITY_CASES: list[tuple[str, dict[str, Any], list[tuple[str, ErrorType]]]] = [
    ("valid", PRIORITY_CLASS, []),
    (
        "valid-system",
        priority_class(metadata={"name": "system-node-critical"}, value=2000001000),
        [],
    ),
    ("too-high", priority_class(value=1000000001), [("value", FORBIDDEN)]),
    (
        "unknown-system",
        priority_class(metadata={"name": "system-mine"}),
        [("metadata.name", FORBIDDEN)],
    ),
    (
        "system-value",
        priority_class(metadata={"name": "system-cluster-critical"}),
        [("metadata.name", FORBIDDEN)],
    ),
    (
        "system-global-default",
        priority_class(
            metadata={"name": "system-cluster-critical"}, value=2000000000, globalDefault=True
        ),
        [("metadata.name", FORBIDDEN)],
    ),
    ("policy", priority_class(preemptionPolicy="Sometimes"), [("preemptionPolicy", NOT_SUPPORTED)]),
    ("policy-empty", priority_class(preemptionPolicy=""), [("preemptionPolicy", REQUIRED)]),
    (
        "no-namespace",
        priority_class(metadata={"namespace": "default"}),
        [("metadata.namespace", FORBIDDEN)],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in PRIORITY_CASES], ids=[c[0] for c in PRIORITY_CASES]
)
def test_priority_class_validation(
    raw: dict[str, Any], expected: list[tuple[str, ErrorType]]
) -> None:
    assert problems(decode(raw, PriorityClass)) == ordered(expected)


def test_priority_class_system_message() -> None:
    errors = walk.validate(decode(priority_class(metadata={"name": "system-x"}), PriorityClass))
    assert [str(e) for e in errors] == [
        "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for "
        "system use only. error: system-x is not a known system priority class"
    ]


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ({"description": "changed", "globalDefault": True}, []),
        ({"value": 5}, [("value", FORBIDDEN)]),
        ({"preemptionPolicy": "Never"}, [("preemptionPolicy", INVALID)]),
    ],
    ids=["mutable-fields", "value", "preemption-policy"],
)
def test_priority_class_update(
    patch: dict[str, Any], expected: list[tuple[str, ErrorType]]
) -> None:
    assert update_problems(PRIORITY_CLASS, priority_class(**patch), PriorityClass) == expected


def test_priority_class_cells() -> None:
    assert cells(decode(PRIORITY_CLASS, PriorityClass)) == [
        "high",
        1000000,
        False,
        "5m",
        "PreemptLowerPriority",
    ]
    info = PriorityClass.kind_info
    assert (info.namespaced, info.short_names) == (False, ("pc",))
    assert [(c.name, c.priority) for c in info.columns] == [
        ("Name", 0),
        ("Value", 0),
        ("Global-Default", 0),
        ("Age", 0),
        ("PreemptionPolicy", 0),
    ]


# discovery.k8s.io/v1.

SLICE: dict[str, Any] = {
    "apiVersion": "discovery.k8s.io/v1",
    "kind": "EndpointSlice",
    "metadata": {
        "name": "web-abc12",
        "namespace": "default",
        "creationTimestamp": CREATED,
        "labels": {"kubernetes.io/service-name": "web"},
    },
    "addressType": "IPv4",
    "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    "endpoints": [
        {
            "addresses": ["10.244.1.5"],
            "conditions": {"ready": True, "serving": True, "terminating": False},
            "nodeName": "node-1",
            "zone": "zone-a",
            "targetRef": {"kind": "Pod", "namespace": "default", "name": "web-0"},
            "hints": {"forZones": [{"name": "zone-a"}], "forNodes": [{"name": "node-1"}]},
        }
    ],
}


def endpoint_slice(**patch: Any) -> dict[str, Any]:
    return merge(SLICE, patch)


def endpoint(**fields: Any) -> dict[str, Any]:
    return {"addresses": ["10.244.1.5"], **fields}


def test_endpoint_port_defaults() -> None:
    raw = endpoint_slice(ports=[{"port": 53}])
    assert to_builtins(decode(raw, EndpointSlice))["ports"] == [
        {"name": "", "protocol": "TCP", "port": 53}
    ]


SLICE_CASES: list[tuple[str, dict[str, Any], list[tuple[str, ErrorType]]]] = [
    ("valid", SLICE, []),
    (
        "valid-ipv6",
        endpoint_slice(addressType="IPv6", endpoints=[endpoint(addresses=["fd00::5"])]),
        [],
    ),
    (
        "valid-fqdn",
        endpoint_slice(addressType="FQDN", endpoints=[endpoint(addresses=["db.example.com"])]),
        [],
    ),
    ("address-type-required", endpoint_slice(addressType=None), [("addressType", REQUIRED)]),
    ("address-type", endpoint_slice(addressType="IP"), [("addressType", NOT_SUPPORTED)]),
    (
        "ipv4",
        endpoint_slice(endpoints=[endpoint(addresses=["fd00::5"])]),
        [("endpoints[0].addresses[0]", INVALID)],
    ),
    (
        "ipv4-loopback",
        endpoint_slice(endpoints=[endpoint(addresses=["127.0.0.1"])]),
        [("endpoints[0].addresses[0]", INVALID)],
    ),
    (
        "ipv6",
        endpoint_slice(addressType="IPv6", endpoints=[endpoint(addresses=["10.0.0.1"])]),
        [("endpoints[0].addresses[0]", INVALID)],
    ),
    (
        "fqdn",
        endpoint_slice(addressType="FQDN", endpoints=[endpoint(addresses=["db"])]),
        [("endpoints[0].addresses[0]", INVALID)],
    ),
    (
        "addresses-required",
        endpoint_slice(endpoints=[{"nodeName": "node-1"}]),
        [("endpoints[0].addresses", REQUIRED)],
    ),
    (
        "too-many-addresses",
        endpoint_slice(
            endpoints=[endpoint(addresses=[f"10.0.{i // 250}.{i % 250 + 1}" for i in range(101)])]
        ),
        [("endpoints[0].addresses", TOO_MANY)],
    ),
    (
        "too-many-endpoints",
        endpoint_slice(endpoints=[endpoint()] * 1001),
        [("endpoints", TOO_MANY)],
    ),
    (
        "too-many-ports",
        endpoint_slice(ports=[{"name": f"p{i}", "port": i + 1} for i in range(101)]),
        [("ports", TOO_MANY)],
    ),
    (
        "port-name",
        endpoint_slice(ports=[{"name": "HTTP", "port": 80}]),
        [("ports[0].name", INVALID)],
    ),
    (
        "port-names-unique",
        endpoint_slice(ports=[{"port": 80}, {"port": 81}]),
        [("ports[1].name", DUPLICATE)],
    ),
    (
        "port-protocol",
        endpoint_slice(ports=[{"port": 80, "protocol": "HTTP"}]),
        [("ports[0].protocol", NOT_SUPPORTED)],
    ),
    (
        "hostname",
        endpoint_slice(endpoints=[endpoint(hostname="web.0")]),
        [("endpoints[0].hostname", INVALID)],
    ),
    (
        "node-name",
        endpoint_slice(endpoints=[endpoint(nodeName="Node 1")]),
        [("endpoints[0].nodeName", INVALID)],
    ),
    (
        "zone-hints",
        endpoint_slice(
            endpoints=[
                endpoint(hints={"forZones": [{"name": "a"}, {"name": "a"}, {"name": "bad zone"}]})
            ]
        ),
        [
            ("endpoints[0].hints.forZones[1].name", DUPLICATE),
            ("endpoints[0].hints.forZones[2].name", INVALID),
        ],
    ),
    (
        "too-many-hints",
        endpoint_slice(
            endpoints=[endpoint(hints={"forNodes": [{"name": f"node-{i}"} for i in range(9)]})]
        ),
        [("endpoints[0].hints.forNodes", TOO_MANY)],
    ),
    (
        "topology",
        endpoint_slice(endpoints=[endpoint(deprecatedTopology={f"k{i}": "v" for i in range(17)})]),
        [("endpoints[0].deprecatedTopology", TOO_MANY)],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in SLICE_CASES], ids=[c[0] for c in SLICE_CASES]
)
def test_endpoint_slice_validation(
    raw: dict[str, Any], expected: list[tuple[str, ErrorType]]
) -> None:
    assert problems(decode(raw, EndpointSlice)) == ordered(expected)


def test_endpoint_slice_address_type_is_immutable() -> None:
    new = endpoint_slice(addressType="IPv6", endpoints=[endpoint(addresses=["fd00::5"])])
    assert update_problems(SLICE, new, EndpointSlice) == [("addressType", INVALID)]


SLICE_CELLS: list[tuple[str, dict[str, Any], list[Any]]] = [
    ("one", SLICE, ["web-abc12", "IPv4", "8080", "10.244.1.5", "5m"]),
    (
        "empty",
        endpoint_slice(ports=None, endpoints=None),
        ["web-abc12", "IPv4", "<unset>", "<unset>", "5m"],
    ),
    (
        "more",
        endpoint_slice(
            ports=[{"name": "a", "port": 80}, {"name": "dns"}, {}, {"name": "d", "port": 90}],
            endpoints=[
                endpoint(addresses=["10.0.0.1", "10.0.0.2"]),
                endpoint(addresses=["10.0.0.3"]),
                endpoint(addresses=["10.0.0.4"]),
            ],
        ),
        [
            "web-abc12",
            "IPv4",
            "80,dns, + 1 more...",
            "10.0.0.1,10.0.0.2,10.0.0.3 + 1 more...",
            "5m",
        ],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in SLICE_CELLS], ids=[c[0] for c in SLICE_CELLS]
)
def test_endpoint_slice_cells(raw: dict[str, Any], expected: list[Any]) -> None:
    assert cells(decode(raw, EndpointSlice)) == expected


def test_endpoint_slice_port_without_name_or_number() -> None:
    obj = from_builtins(endpoint_slice(ports=[{}]), EndpointSlice).obj  # not defaulted
    assert cells(obj)[2] == "*"


# storage.k8s.io/v1.

STORAGE_CLASS: dict[str, Any] = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {"name": "fast", "creationTimestamp": CREATED},
    "provisioner": "ebs.csi.aws.com",
    "parameters": {"type": "gp3"},
}


def storage_class(**patch: Any) -> dict[str, Any]:
    return merge(STORAGE_CLASS, patch)


ZONES = {
    "matchLabelExpressions": [
        {"key": "topology.kubernetes.io/zone", "values": ["zone-a", "zone-b"]}
    ]
}


def test_storage_class_defaults() -> None:
    raw = to_builtins(decode(STORAGE_CLASS, StorageClass))
    assert (raw["reclaimPolicy"], raw["volumeBindingMode"]) == ("Delete", "Immediate")
    kept = decode(
        storage_class(reclaimPolicy="Retain", volumeBindingMode="WaitForFirstConsumer"),
        StorageClass,
    )
    assert (kept.reclaim_policy, kept.volume_binding_mode) == ("Retain", "WaitForFirstConsumer")


STORAGE_CASES: list[tuple[str, dict[str, Any], list[tuple[str, ErrorType]]]] = [
    ("valid", storage_class(allowedTopologies=[ZONES], mountOptions=["debug"]), []),
    ("valid-uppercase-provisioner", storage_class(provisioner="kubernetes.io/AWS-EBS"), []),
    ("provisioner-required", storage_class(provisioner=None), [("provisioner", REQUIRED)]),
    ("provisioner", storage_class(provisioner="not a name"), [("provisioner", INVALID)]),
    ("reclaim-policy", storage_class(reclaimPolicy="Recycle"), [("reclaimPolicy", NOT_SUPPORTED)]),
    (
        "binding-mode",
        storage_class(volumeBindingMode="Later"),
        [("volumeBindingMode", NOT_SUPPORTED)],
    ),
    ("empty-parameter-key", storage_class(parameters={"": "x"}), [("parameters", INVALID)]),
    (
        "too-many-parameters",
        storage_class(parameters={f"k{i}": "v" for i in range(513)}),
        [("parameters", TOO_LONG)],
    ),
    (
        "parameters-too-large",
        storage_class(parameters={"k": "v" * 256 * 1024}),
        [("parameters", TOO_LONG)],
    ),
    (
        "topology-values",
        storage_class(
            allowedTopologies=[
                {
                    "matchLabelExpressions": [
                        {"key": "zone", "values": []},
                        {"key": "zone", "values": ["a", "a"]},
                    ]
                }
            ]
        ),
        [
            ("allowedTopologies[0].matchLabelExpressions[0].values", REQUIRED),
            ("allowedTopologies[0].matchLabelExpressions[1].key", DUPLICATE),
            ("allowedTopologies[0].matchLabelExpressions[1].values[1]", DUPLICATE),
        ],
    ),
    (
        "topology-key",
        storage_class(
            allowedTopologies=[{"matchLabelExpressions": [{"key": "-zone", "values": ["a"]}]}]
        ),
        [("allowedTopologies[0].matchLabelExpressions[0].key", INVALID)],
    ),
    (
        "topology-duplicate-term",
        storage_class(allowedTopologies=[ZONES, ZONES]),
        [("allowedTopologies[1].matchLabelExpressions", DUPLICATE)],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in STORAGE_CASES], ids=[c[0] for c in STORAGE_CASES]
)
def test_storage_class_validation(
    raw: dict[str, Any], expected: list[tuple[str, ErrorType]]
) -> None:
    assert problems(decode(raw, StorageClass)) == ordered(expected)


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ({"allowVolumeExpansion": True, "mountOptions": ["ro"]}, []),
        ({"provisioner": "other.csi.io"}, [("provisioner", FORBIDDEN)]),
        ({"parameters": {"type": "io2"}}, [("parameters", FORBIDDEN)]),
        ({"reclaimPolicy": "Retain"}, [("reclaimPolicy", FORBIDDEN)]),
        ({"volumeBindingMode": "WaitForFirstConsumer"}, [("volumeBindingMode", INVALID)]),
    ],
    ids=["mutable-fields", "provisioner", "parameters", "reclaim-policy", "binding-mode"],
)
def test_storage_class_update(patch: dict[str, Any], expected: list[tuple[str, ErrorType]]) -> None:
    assert update_problems(STORAGE_CLASS, storage_class(**patch), StorageClass) == expected


@pytest.mark.parametrize(
    ("annotations", "name"),
    [
        ({}, "fast"),
        ({"storageclass.kubernetes.io/is-default-class": "true"}, "fast (default)"),
        ({"storageclass.beta.kubernetes.io/is-default-class": "true"}, "fast (default)"),
        ({"storageclass.kubernetes.io/is-default-class": "false"}, "fast"),
    ],
    ids=["plain", "default", "beta-default", "not-default"],
)
def test_storage_class_cells(annotations: dict[str, str], name: str) -> None:
    raw = storage_class(metadata={"annotations": annotations}, allowVolumeExpansion=True)
    assert cells(decode(raw, StorageClass)) == [
        name,
        "ebs.csi.aws.com",
        "Delete",
        "Immediate",
        True,
        "5m",
    ]
    info = StorageClass.kind_info
    assert (info.namespaced, info.short_names) == (False, ("sc",))
