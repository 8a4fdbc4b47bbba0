"""resource.k8s.io/v1 DeviceClass, ResourceClaim, ResourceClaimTemplate and ResourceSlice:
defaults, validation with upstream's paths and messages, the list limits, immutability, printer
cells and registration."""

from __future__ import annotations

from typing import Any

import pytest

from kube.api import walk
from kube.api.codec import to_builtins
from kube.api.errors import ErrorType
from kube.api.kinds.resource_v1 import (
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from kube.api.meta_v1 import Resource
from tests.kube.api.kinds.helpers import (
    CREATED,
    DUPLICATE,
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

SELECTOR = {"cel": {"expression": 'device.driver == "gpu.example.com"'}}
OPAQUE = {"opaque": {"driver": "gpu.example.com", "parameters": {"sharing": "TimeSlicing"}}}
CLASS: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com", "creationTimestamp": CREATED},
    "spec": {"selectors": [SELECTOR], "config": [OPAQUE]},
}


def device_class(**spec: Any) -> dict[str, Any]:
    return merge(CLASS, {"spec": spec})


def opaque(**fields: Any) -> dict[str, Any]:
    return {"opaque": {"driver": "gpu.example.com", "parameters": {}, **fields}}


def test_a_class_without_spec_gets_an_empty_one() -> None:
    bare = merge(CLASS, {"spec": None})
    assert to_builtins(decode(bare, DeviceClass))["spec"] == {}


CASES: list[tuple[str, dict[str, Any], list[tuple[str, ErrorType]]]] = [
    ("valid", CLASS, []),
    ("selector-without-cel", device_class(selectors=[{}]), [("spec.selectors[0].cel", REQUIRED)]),
    (
        "empty-expression",
        device_class(selectors=[{"cel": {"expression": ""}}]),
        [("spec.selectors[0].cel.expression", REQUIRED)],
    ),
    (
        "long-expression",
        device_class(selectors=[{"cel": {"expression": "x" * (10 * 1024 + 1)}}]),
        [("spec.selectors[0].cel.expression", TOO_LONG)],
    ),
    ("too-many-selectors", device_class(selectors=[SELECTOR] * 33), [("spec.selectors", TOO_MANY)]),
    ("too-many-configs", device_class(config=[OPAQUE] * 33), [("spec.config", TOO_MANY)]),
    ("config-without-opaque", device_class(config=[{}]), [("spec.config[0].opaque", REQUIRED)]),
    (
        "driver-name",
        device_class(config=[opaque(driver="Not_A_Driver")]),
        [("spec.config[0].opaque.driver", INVALID)],
    ),
    (
        "driver-too-long",
        device_class(config=[opaque(driver="d" * 64)]),
        [("spec.config[0].opaque.driver", TOO_LONG)],
    ),
    (
        "no-parameters",
        device_class(config=[opaque(parameters=None)]),
        [("spec.config[0].opaque.parameters", REQUIRED)],
    ),
    (
        "parameters-not-an-object",
        device_class(config=[opaque(parameters=[1, 2])]),
        [("spec.config[0].opaque.parameters", INVALID)],
    ),
    (
        "parameters-too-long",
        device_class(config=[opaque(parameters={"blob": "x" * (10 * 1024)})]),
        [("spec.config[0].opaque.parameters", TOO_LONG)],
    ),
    ("extended-resource", device_class(extendedResourceName="example.com/gpu"), []),
    (
        "native-resource",
        device_class(extendedResourceName="cpu"),
        [("spec.extendedResourceName", INVALID)],
    ),
]


@pytest.mark.parametrize(("raw", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_validation(raw: dict[str, Any], expected: list[tuple[str, ErrorType]]) -> None:
    assert problems(decode(raw, DeviceClass)) == ordered(expected)


def test_messages() -> None:
    raw = device_class(
        config=[opaque(parameters="text")], extendedResourceName="requests.example.com/gpu"
    )
    assert sorted(str(e) for e in walk.validate(decode(raw, DeviceClass))) == [
        'spec.config[0].opaque.parameters: Invalid value: "<value omitted>": parameters must '
        "be a valid JSON object",
        'spec.extendedResourceName: Invalid value: "requests.example.com/gpu": must be a valid '
        "extended resource name",
    ]


CLAIM: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "gpu", "namespace": "default", "creationTimestamp": CREATED},
    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
}
TEMPLATE: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "gpu", "namespace": "default", "creationTimestamp": CREATED},
    "spec": {"spec": CLAIM["spec"]},
}


def claim(*requests: dict[str, Any], **devices: Any) -> dict[str, Any]:
    return merge(CLAIM, {"spec": {"devices": {"requests": list(requests), **devices}}})


def exactly(**fields: Any) -> dict[str, Any]:
    return {"name": "gpu", "exactly": {"deviceClassName": "gpu", **fields}}


def test_requests_default_to_one_device() -> None:
    sub = {"name": "small", "deviceClassName": "gpu"}
    raw = claim(exactly(), {"name": "any", "firstAvailable": [sub]}, exactly(allocationMode="All"))
    requests = to_builtins(decode(raw, ResourceClaim))["spec"]["devices"]["requests"]
    assert [r.get("exactly") or r["firstAvailable"][0] for r in requests] == [
        {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1},
        {**sub, "allocationMode": "ExactCount", "count": 1},
        {"deviceClassName": "gpu", "allocationMode": "All"},
    ]
    tolerated = claim(exactly(tolerations=[{"key": "k"}]))
    devices = to_builtins(decode(tolerated, ResourceClaim))["spec"]["devices"]
    assert devices["requests"][0]["exactly"]["tolerations"] == [{"key": "k", "operator": "Equal"}]


REQUEST = "spec.devices.requests[0]"
CLAIM_CASES: list[tuple[str, dict[str, Any], list[tuple[str, ErrorType]]]] = [
    ("valid", CLAIM, []),
    ("no-request-type", claim({"name": "gpu"}), [(REQUEST, REQUIRED)]),
    (
        "both-request-types",
        claim({**exactly(), "firstAvailable": [{"name": "a", "deviceClassName": "gpu"}]}),
        [(REQUEST, INVALID)],
    ),
    ("request-name", claim({**exactly(), "name": "GPU"}), [(f"{REQUEST}.name", INVALID)]),
    ("duplicate-request", claim(exactly(), exactly()), [("spec.devices.requests[1]", DUPLICATE)]),
    (
        "no-class",
        claim(exactly(deviceClassName=None)),
        [(f"{REQUEST}.exactly.deviceClassName", REQUIRED)],
    ),
    (
        "bad-class",
        claim(exactly(deviceClassName="Gpu_Class")),
        [(f"{REQUEST}.exactly.deviceClassName", INVALID)],
    ),
    ("zero-count", claim(exactly(count=0)), [(f"{REQUEST}.exactly.count", INVALID)]),
    (
        "count-with-all",
        claim(exactly(allocationMode="All", count=2)),
        [(f"{REQUEST}.exactly.count", INVALID)],
    ),
    (
        "unknown-mode",
        claim(exactly(allocationMode="Some")),
        [(f"{REQUEST}.exactly.allocationMode", NOT_SUPPORTED)],
    ),
    (
        "selector-without-cel",
        claim(exactly(selectors=[{}])),
        [(f"{REQUEST}.exactly.selectors[0].cel", REQUIRED)],
    ),
    (
        "too-many-subrequests",
        claim({"name": "gpu", "firstAvailable": [{"name": "a", "deviceClassName": "gpu"}] * 9}),
        [(f"{REQUEST}.firstAvailable", TOO_MANY)]
        + [(f"{REQUEST}.firstAvailable[{i}]", DUPLICATE) for i in range(1, 9)],
    ),
    (
        "toleration",
        claim(exactly(tolerations=[{"operator": "Exists", "value": "v", "effect": "Later"}])),
        [
            (f"{REQUEST}.exactly.tolerations[0].value", INVALID),
            (f"{REQUEST}.exactly.tolerations[0].effect", NOT_SUPPORTED),
        ],
    ),
    (
        "too-many-requests",
        claim(*[{"name": f"r{i}", "exactly": {"deviceClassName": "gpu"}} for i in range(33)]),
        [("spec.devices.requests", TOO_MANY)],
    ),
    (
        "unknown-constraint-request",
        claim(exactly(), constraints=[{"requests": ["gpu", "nic"], "matchAttribute": "a.io/b"}]),
        [("spec.devices.constraints[0].requests[1]", INVALID)],
    ),
    (
        "config-for-a-subrequest",
        claim(
            {"name": "gpu", "firstAvailable": [{"name": "a", "deviceClassName": "gpu"}]},
            config=[{"requests": ["gpu/a", "gpu/b"], **opaque()}],
        ),
        [("spec.devices.config[0].requests[1]", INVALID)],
    ),
    (
        "duplicate-reservation",
        merge(
            CLAIM, {"status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "1"}] * 2}}
        ),
        [("status.reservedFor[1].uid", DUPLICATE)],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in CLAIM_CASES], ids=[c[0] for c in CLAIM_CASES]
)
def test_claim_validation(raw: dict[str, Any], expected: list[tuple[str, ErrorType]]) -> None:
    assert problems(decode(raw, ResourceClaim)) == ordered(expected)


def test_template_validation_is_the_claims_under_spec_spec() -> None:
    assert problems(decode(TEMPLATE, ResourceClaimTemplate)) == []
    zero = merge(TEMPLATE, {"spec": {"spec": claim(exactly(count=0))["spec"]}})
    assert [str(e) for e in walk.validate(decode(zero, ResourceClaimTemplate))] == [
        "spec.spec.devices.requests[0].exactly.count: Invalid value: 0: must be greater than zero"
    ]


@pytest.mark.parametrize(
    ("raw", "cls"), [(CLAIM, ResourceClaim), (TEMPLATE, ResourceClaimTemplate)]
)
def test_claim_specs_are_immutable(raw: dict[str, Any], cls: type[Resource]) -> None:
    labelled = merge(raw, {"metadata": {"labels": {"a": "b"}}})
    assert update_problems(raw, labelled, cls) == []
    spec = claim(exactly(count=2))["spec"]
    other = merge(raw, {"spec": spec if cls is ResourceClaim else {"spec": spec}})
    assert update_problems(raw, other, cls) == [("spec", INVALID)]


SLICE: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "node1-gpu", "creationTimestamp": CREATED},
    "spec": {
        "driver": "gpu.example.com",
        "pool": {"name": "node1", "generation": 1, "resourceSliceCount": 1},
        "nodeName": "node1",
        "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "a100"}}}],
    },
}


def resource_slice(**spec: Any) -> dict[str, Any]:
    return merge(SLICE, {"spec": spec})


def device(**fields: Any) -> dict[str, Any]:
    return {"name": "gpu-0", **fields}


SLICE_CASES: list[tuple[str, dict[str, Any], list[tuple[str, ErrorType]]]] = [
    ("valid", SLICE, []),
    ("no-node-selection", resource_slice(nodeName=None), [("spec", REQUIRED)]),
    ("two-node-selections", resource_slice(allNodes=True), [("spec", INVALID)]),
    (
        "all-nodes-false",
        resource_slice(nodeName=None, allNodes=False),
        [("spec", REQUIRED), ("spec.allNodes", INVALID)],
    ),
    (
        "two-selector-terms",
        resource_slice(
            nodeName=None,
            nodeSelector={"nodeSelectorTerms": [{"matchFields": []}, {"matchFields": []}]},
        ),
        [("spec.nodeSelector.nodeSelectorTerms", INVALID)],
    ),
    ("bad-driver", resource_slice(driver="Gpu_Driver"), [("spec.driver", INVALID)]),
    (
        "pool",
        resource_slice(pool={"name": "a/B", "generation": -1, "resourceSliceCount": 0}),
        [
            ("spec.pool.name", INVALID),
            ("spec.pool.resourceSliceCount", INVALID),
            ("spec.pool.generation", INVALID),
        ],
    ),
    (
        "device-name",
        resource_slice(devices=[device(name="GPU")]),
        [("spec.devices[0].name", INVALID)],
    ),
    (
        "duplicate-device",
        resource_slice(devices=[device(), device()]),
        [("spec.devices[1]", DUPLICATE)],
    ),
    (
        "too-many-devices",
        resource_slice(devices=[device(name=f"d{i}") for i in range(129)]),
        [("spec.devices", TOO_MANY)],
    ),
    (
        "too-many-tainted-devices",
        resource_slice(
            devices=[
                device(name=f"d{i}", taints=[{"key": "k", "effect": "NoSchedule"}])
                for i in range(65)
            ]
        ),
        [("spec.devices", TOO_MANY)],
    ),
    (
        "attribute-values",
        resource_slice(devices=[device(attributes={"a": {}, "b": {"int": 1, "bool": True}})]),
        [("spec.devices[0].attributes[a]", INVALID), ("spec.devices[0].attributes[b]", INVALID)],
    ),
    (
        "attribute-name",
        resource_slice(devices=[device(attributes={"a.io/b-c": {"int": 1}})]),
        [("spec.devices[0].attributes[a.io/b-c]", INVALID)],
    ),
    (
        "version",
        resource_slice(devices=[device(attributes={"v": {"version": "1.2"}})]),
        [("spec.devices[0].attributes[v].version", INVALID)],
    ),
    (
        "too-many-attributes",
        resource_slice(
            devices=[
                device(
                    attributes={f"a{i}": {"int": i} for i in range(20)},
                    capacity={f"c{i}": {"value": "1"} for i in range(13)},
                )
            ]
        ),
        [("spec.devices[0]", INVALID)],
    ),
    (
        "taint-effect",
        resource_slice(devices=[device(taints=[{"key": "k", "effect": "PreferNoSchedule"}])]),
        [("spec.devices[0].taints[0].effect", NOT_SUPPORTED)],
    ),
    (
        "device-node-without-per-device-selection",
        resource_slice(devices=[device(nodeName="node1")]),
        [("spec.devices[0]", INVALID)],
    ),
    (
        "devices-and-counters",
        resource_slice(sharedCounters=[{"name": "mem", "counters": {"m": {"value": "1"}}}]),
        [("spec", INVALID)],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in SLICE_CASES], ids=[c[0] for c in SLICE_CASES]
)
def test_slice_validation(raw: dict[str, Any], expected: list[tuple[str, ErrorType]]) -> None:
    assert problems(decode(raw, ResourceSlice)) == ordered(expected)


def test_slice_messages() -> None:
    raw = resource_slice(allNodes=True)
    assert [str(e) for e in walk.validate(decode(raw, ResourceSlice))] == [
        'spec: Invalid value: "{`nodeName`, `allNodes`}": exactly one of `nodeName`, '
        "`nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields "
        "are set"
    ]


def test_slice_driver_pool_and_node_are_immutable() -> None:
    moved = resource_slice(
        driver="other.example.com",
        pool={"name": "other", "generation": 2, "resourceSliceCount": 1},
        nodeName="node2",
    )
    assert update_problems(SLICE, moved, ResourceSlice) == ordered(
        [("spec.pool.name", INVALID), ("spec.driver", INVALID), ("spec.nodeName", INVALID)]
    )
    generation = resource_slice(pool={"name": "node1", "generation": 2, "resourceSliceCount": 1})
    assert update_problems(SLICE, generation, ResourceSlice) == []


def test_cells_and_registration() -> None:
    assert cells(decode(CLASS, DeviceClass)) == ["gpu.example.com", "5m"]
    assert cells(decode(TEMPLATE, ResourceClaimTemplate)) == ["gpu", "5m"]
    assert cells(decode(SLICE, ResourceSlice)) == [
        "node1-gpu",
        "node1",
        "gpu.example.com",
        "node1",
        "5m",
    ]
    everywhere = resource_slice(nodeName=None, allNodes=True)
    assert cells(decode(everywhere, ResourceSlice))[1] == ""
    allocation: dict[str, Any] = {"devices": {"results": []}}
    reserved = {
        "allocation": allocation,
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "1"}],
    }
    deleting = {"deletionTimestamp": CREATED}
    states = [
        (CLAIM, "pending"),
        (merge(CLAIM, {"status": {"allocation": allocation}}), "allocated"),
        (merge(CLAIM, {"status": reserved}), "allocated,reserved"),
        (merge(CLAIM, {"metadata": deleting}), "deleted"),
        (merge(CLAIM, {"metadata": deleting, "status": reserved}), "deleted,allocated,reserved"),
    ]
    for raw, state in states:
        assert cells(decode(raw, ResourceClaim)) == ["gpu", state, "5m"]
    registered = [
        (
            info.plural,
            info.namespaced,
            info.short_names,
            info.subresources,
            info.returns_deleted,
            [c.name for c in info.columns],
        )
        for info in (
            DeviceClass.kind_info,
            ResourceClaim.kind_info,
            ResourceClaimTemplate.kind_info,
            ResourceSlice.kind_info,
        )
    ]
    assert registered == [
        ("deviceclasses", False, (), (), True, ["Name", "Age"]),
        ("resourceclaims", True, (), ("status",), True, ["Name", "State", "Age"]),
        ("resourceclaimtemplates", True, (), (), True, ["Name", "Age"]),
        ("resourceslices", False, (), (), True, ["Name", "Node", "Driver", "Pool", "Age"]),
    ]
    selectable = ResourceSlice.kind_info.selectable_fields(decode(SLICE, ResourceSlice))
    assert {k: selectable[k] for k in ("spec.nodeName", "spec.driver")} == {
        "spec.nodeName": "node1",
        "spec.driver": "gpu.example.com",
    }
