"""No input makes decoding, defaulting or validation raise anything but ``DecodeError``.

Two sources of input: arbitrary JSON values, and corpus manifests with one subtree replaced by
an arbitrary value (which reaches deep into the declarations, where random JSON rarely goes).
"""

from __future__ import annotations

import contextlib
import copy
import json
import pathlib
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kube.api.kinds  # noqa: F401  (registers every kind)
from kube.api import codec, walk
from kube.api.scheme import SCHEME

MANIFESTS = [
    item
    for path in sorted((pathlib.Path(__file__).parent / "manifests").glob("*.yaml"))
    for document in codec.load_yaml_documents(path.read_text())
    for item in codec.iter_objects(document)
    if SCHEME.by_kind(item["apiVersion"], item["kind"]) is not None
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, (*prefix, i))
    return found


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    value = copy.deepcopy(value)
    node = value
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = new
    return value


def _exercise(raw: Any) -> None:
    try:
        obj = codec.decode_object(raw).obj
    except codec.DecodeError:
        return
    walk.set_defaults(obj)
    walk.validate(obj)
    walk.validate_update(obj, codec.decode_object(raw).obj)
    codec.decode_json(codec.encode_json(obj), type(obj))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(MANIFESTS), st.data(), json_values)
def test_mutated_manifests_never_crash(manifest: Any, data: st.DataObject, new: Any) -> None:
    path = data.draw(st.sampled_from(_paths(manifest)[1:]))
    _exercise(_replace(manifest, path, new))


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_arbitrary_json_never_crashes(raw: Any) -> None:
    _exercise(raw)
    with contextlib.suppress(codec.DecodeError):
        codec.decode_json(json.dumps(raw), next(iter(SCHEME)).cls)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_crash(data: bytes) -> None:
    for info in list(SCHEME)[:3]:
        with contextlib.suppress(codec.DecodeError):
            codec.decode_json(data, info.cls)
    with contextlib.suppress(codec.DecodeError):
        codec.load_manifests(data)
