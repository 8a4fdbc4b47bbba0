"""Every declared kind against the official Kubernetes Python client's models.

The client's generated models list, for each type, every field and its JSON name.  Walking our
declaration beside theirs finds fields we forgot (a manifest using them would be rejected under
fieldValidation=Strict) and fields we invented or misspelt (``podIp`` for ``podIP``).  This is a
check of our declarations against the published API, not a source of them.
"""

from __future__ import annotations

import re
from typing import Any

import kubernetes.client as k8s_models
import pytest
from msgspec import inspect as mi

import kube.api.kinds  # noqa: F401  (registers every kind)
from kube.api.scheme import SCHEME, KindInfo

# Client model names that do not follow <Version><Kind> (V1Pod, V2HorizontalPodAutoscaler).
MODEL_NAMES = {
    ("", "Event"): "CoreV1Event",
    ("events.k8s.io", "Event"): "EventsV1Event",
    ("", "EndpointPort"): "CoreV1EndpointPort",
    ("discovery.k8s.io", "EndpointPort"): "DiscoveryV1EndpointPort",
    ("authentication.k8s.io", "TokenRequest"): "AuthenticationV1TokenRequest",
    ("resource.k8s.io", "ResourceClaim"): "ResourceV1ResourceClaim",
}

_CONTAINER = re.compile(r"^(list|dict)\[(?:str, )?(.+)\]$")


def _model(info: KindInfo) -> Any:
    name = MODEL_NAMES.get((info.group, info.kind), f"{info.version.capitalize()}{info.kind}")
    return getattr(k8s_models, name)


def _struct_of(t: mi.Type) -> type | None:
    """The struct class a field type holds (directly, as items, or as values)."""
    if isinstance(t, mi.Metadata):
        return _struct_of(t.type)
    if isinstance(t, mi.StructType):
        return t.cls
    if isinstance(t, mi.ListType):
        return _struct_of(t.item_type)
    if isinstance(t, mi.DictType):
        return _struct_of(t.value_type)
    if isinstance(t, mi.UnionType):
        for member in t.types:
            found = _struct_of(member)
            if found is not None:
                return found
    return None


def compare(ours: type, theirs: Any, path: str, seen: set[tuple[type, Any]]) -> list[str]:
    """Differences between our struct and the client's model, recursively."""
    if (ours, theirs) in seen:
        return []
    seen.add((ours, theirs))
    info = mi.type_info(ours)
    assert isinstance(info, mi.StructType)
    our_fields = {f.encode_name: f for f in info.fields}
    their_fields = {theirs.attribute_map[a]: t for a, t in theirs.openapi_types.items()}
    problems = [f"{path}.{name}: missing" for name in their_fields if name not in our_fields]
    problems += [
        f"{path}.{name}: not in the API" for name in our_fields if name not in their_fields
    ]
    for name, their_type in their_fields.items():
        if name not in our_fields:
            continue
        match = _CONTAINER.match(their_type)
        model_name = match.group(2) if match else their_type
        model = getattr(k8s_models, model_name, None)
        if model is None or not hasattr(model, "openapi_types"):
            continue
        child = _struct_of(our_fields[name].type)
        if child is None:
            problems.append(f"{path}.{name}: declared without structure ({model_name})")
            continue
        problems += compare(child, model, f"{path}.{name}", seen)
    return problems


KINDS = [
    info
    for info in SCHEME
    if hasattr(k8s_models, MODEL_NAMES.get((info.group, info.kind), f"V1{info.kind}"))
]


@pytest.mark.parametrize("info", KINDS, ids=[f"{i.api_version}/{i.kind}" for i in KINDS])
def test_kind_matches_published_api(info: KindInfo) -> None:
    assert compare(info.cls, _model(info), info.kind, set()) == []


def test_every_kind_has_a_published_model() -> None:
    """Every kind the API server serves: the official client is generated from its OpenAPI,
    which the aggregated kinds (metrics.k8s.io) are not part of."""
    missing = [f"{i.api_version}/{i.kind}" for i in SCHEME.served() if i not in KINDS]
    assert missing == []
