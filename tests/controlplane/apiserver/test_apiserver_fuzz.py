"""Fuzzing the API server's request handling with hypothesis: garbage bodies in every kind's
decoders (JSON, YAML, protobuf), garbage patches of every patch type and server-side apply,
and garbage selectors and list options.  Each example is a real HTTPS request to an in-process
server (running on a thread of its own, so hypothesis drives it synchronously); whatever the
input, the answer must be a Status below 500, or a success, and the server must keep serving.

Writes use ``dryRun=All``, so the examples go through decoding, defaulting, admission and
validation without leaving objects behind that would change later examples.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import ssl
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controlplane.storage.sqlite import SQLiteStore
from kube.api.scheme import SCHEME, KindInfo
from tests.controlplane.apiserver.inprocess import admin_ssl, serving

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
NAMESPACE = "fuzz"


class BackgroundServer:
    """An in-process API server on its own event loop thread, and a blocking client."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fuzz-server")
        self.stack = contextlib.AsyncExitStack()
        self.port = 0
        self.context: ssl.SSLContext | None = None

    async def _start(self) -> None:
        store = await SQLiteStore.open(self.base / "state.db", synchronous="OFF")
        self.stack.push_async_callback(store.close)
        running, _ = await self.stack.enter_async_context(serving(store, self.base / "data"))
        self.port = running.port

    def start(self) -> None:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(60)
        self.context = admin_ssl(self.base / "data")

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.stack.aclose(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()

    def request(
        self, method: str, path: str, body: bytes | None = None, content_type: str = ""
    ) -> tuple[int, Any]:
        connection = http.client.HTTPSConnection(
            "127.0.0.1", self.port, context=self.context, timeout=60
        )
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            raw = response.read()
        finally:
            connection.close()
        return response.status, json.loads(raw) if raw[:1] == b"{" else raw

    def check(
        self, method: str, path: str, body: bytes | None = None, content_type: str = ""
    ) -> tuple[int, Any]:
        """The request's answer, which must not be a server error."""
        status, answer = self.request(method, path, body, content_type)
        # Upstream's answer to a resourceVersion the watch cache cannot reach in time.
        too_large = status == 504 and isinstance(answer, dict) and answer["reason"] == "Timeout"
        assert status < 500 or too_large, (method, path, body, content_type, status, answer)
        if status >= 400:
            assert isinstance(answer, dict) and answer.get("kind") == "Status", answer
        return status, answer


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundServer]:
    running = BackgroundServer(tmp_path_factory.mktemp("fuzz"))
    running.start()
    try:
        status, _ = running.request(
            "POST", "/api/v1/namespaces", json.dumps({"metadata": {"name": NAMESPACE}}).encode()
        )
        assert status == 201
        yield running
    finally:
        running.stop()


def collection(info: KindInfo) -> str:
    base = f"/apis/{info.group}/{info.version}" if info.group else f"/api/{info.version}"
    if info.namespaced:
        return f"{base}/namespaces/{NAMESPACE}/{info.plural}"
    return f"{base}/{info.plural}"


CREATABLE = sorted(
    (info for info in SCHEME.served() if "create" in info.verbs),
    key=lambda info: (info.group, info.plural),
)

# JSON-like values: the shapes request bodies are made of, with the odd ones that break
# decoders (huge numbers, floats where integers go, deep nesting, empty keys).
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)


def fields_of(info: KindInfo) -> list[str]:
    """The JSON names of a kind's top-level fields, so garbage lands where decoders look."""
    struct_info = getattr(info.cls, "__struct_encode_fields__", ())
    return [name for name in struct_info if name not in ("apiVersion", "kind")]


@st.composite
def objects(draw: st.DrawFn, info: KindInfo) -> dict[str, Any]:
    """An object of roughly the kind's shape: its apiVersion and kind (mostly), a name, and
    garbage under some of its real fields and a few made-up ones."""
    obj: dict[str, Any] = {}
    if draw(st.integers(min_value=0, max_value=5)):
        obj["apiVersion"] = draw(st.sampled_from([info.api_version, "v1", "bogus/v9", ""]))
        obj["kind"] = draw(st.sampled_from([info.kind, "Pod", "", "Nonsense"]))
    meta = draw(
        st.one_of(
            st.just({"name": "fuzzed"}),
            st.fixed_dictionaries(
                {"name": st.text(max_size=20)},
                optional={
                    "labels": st.dictionaries(st.text(max_size=10), json_values, max_size=3),
                    "annotations": json_values,
                    "namespace": st.text(max_size=10),
                    "resourceVersion": st.text(max_size=8),
                    "generateName": st.text(max_size=8),
                    "finalizers": json_values,
                    "ownerReferences": json_values,
                    "creationTimestamp": st.text(max_size=25),
                },
            ),
            json_values,
        )
    )
    obj["metadata"] = meta
    names = fields_of(info)
    if names:
        for name in draw(st.lists(st.sampled_from(names), max_size=3, unique=True)):
            obj[name] = draw(json_values)
    obj.update(draw(st.dictionaries(st.text(max_size=8), json_values, max_size=2)))
    return obj


def protobuf_field(number: int, wire: int, payload: bytes | int) -> bytes:
    def varint(value: int) -> bytes:
        out = b""
        while True:
            byte, value = value & 0x7F, value >> 7
            out += bytes([byte | (0x80 if value else 0)])
            if not value:
                return out

    key = varint((number << 3) | wire)
    if wire == 0:
        return key + varint(int(payload) if isinstance(payload, int) else len(payload))
    if wire == 2:
        data = payload if isinstance(payload, bytes) else b""
        return key + varint(len(data)) + data
    if wire == 1:
        return key + (payload if isinstance(payload, bytes) else b"").ljust(8, b"\0")[:8]
    return key + (payload if isinstance(payload, bytes) else b"").ljust(4, b"\0")[:4]


messages = st.recursive(
    st.binary(max_size=16),
    lambda inner: st.lists(
        st.tuples(
            st.integers(min_value=1, max_value=20),
            st.sampled_from([0, 1, 2, 5]),
            st.one_of(inner, st.integers(min_value=0, max_value=2**64 - 1)),
        ),
        max_size=6,
    ).map(lambda fields: b"".join(protobuf_field(n, w, p) for n, w, p in fields)),
    max_leaves=12,
)


@st.composite
def protobuf_bodies(draw: st.DrawFn, info: KindInfo) -> bytes:
    """``k8s\\0`` + an Unknown envelope (typeMeta, raw) around a plausible or random message,
    or plain random bytes."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=64))
    type_meta = protobuf_field(1, 2, info.api_version.encode()) + protobuf_field(
        2, 2, draw(st.sampled_from([info.kind, "Pod", ""])).encode()
    )
    envelope = protobuf_field(1, 2, type_meta) + protobuf_field(2, 2, draw(messages))
    if draw(st.booleans()):
        envelope += protobuf_field(3, 2, draw(st.binary(max_size=8)))
    return b"k8s\x00" + envelope


@st.composite
def bodies(draw: st.DrawFn) -> tuple[KindInfo, bytes, str]:
    info = draw(st.sampled_from(CREATABLE))
    content_type = draw(
        st.sampled_from(
            ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"]
        )
    )
    if content_type.endswith("protobuf"):
        return info, draw(protobuf_bodies(info)), content_type
    obj = draw(st.one_of(objects(info), json_values))
    if content_type == "application/yaml":
        text = yaml.safe_dump(obj) if draw(st.booleans()) else draw(st.text(max_size=60))
        return info, text.encode(), content_type
    raw = json.dumps(obj).encode()
    if draw(st.integers(min_value=0, max_value=4)) == 0:
        cut = draw(st.integers(min_value=0, max_value=len(raw)))
        raw = raw[:cut] + draw(st.binary(max_size=4))
    return info, raw, content_type


@FUZZ
@given(case=bodies())
def test_request_decoding(server: BackgroundServer, case: tuple[KindInfo, bytes, str]) -> None:
    info, body, content_type = case
    server.check("POST", f"{collection(info)}?dryRun=All", body, content_type)


PATCH_TARGETS = {
    "configmap": (
        "/api/v1/namespaces/fuzz/configmaps/target",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "target"}, "data": {}},
    ),
    "deployment": (
        "/apis/apps/v1/namespaces/fuzz/deployments/target",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "target", "labels": {"app": "t"}},
            "spec": {
                "selector": {"matchLabels": {"app": "t"}},
                "template": {
                    "metadata": {"labels": {"app": "t"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox", "ports": []}]},
                },
            },
        },
    ),
}

pointers = st.one_of(
    st.sampled_from(
        [
            "",
            "/",
            "/metadata/labels/a",
            "/metadata/name",
            "/spec/template/spec/containers/0/image",
            "/spec/template/spec/containers/-",
            "/spec/replicas",
            "/data/k",
            "/metadata/labels/a~1b",
            "/spec/template/spec/containers/99",
            "/spec/template/spec/containers/-1",
            "/metadata/~2",
        ]
    ),
    st.text(max_size=20),
)
json_patch_ops = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {
                "op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test", "x"]),
                "path": pointers,
            },
            optional={"value": json_values, "from": pointers},
        ),
        json_values,
    ),
    max_size=4,
)

patch_keys = st.sampled_from(
    [
        "$patch",
        "$retainKeys",
        "$setElementOrder/containers",
        "$deleteFromPrimitiveList/finalizers",
        "containers",
        "metadata",
        "spec",
        "template",
        "labels",
        "name",
        "image",
        "ports",
        "data",
        "replicas",
    ]
)
merge_patches = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(patch_keys, st.text(max_size=6)), inner, max_size=4),
    ),
    max_leaves=16,
)


@pytest.fixture(scope="module")
def targets(server: BackgroundServer) -> dict[str, str]:
    paths = {}
    for name, (path, obj) in PATCH_TARGETS.items():
        status, answer = server.request(
            "POST", path.rsplit("/", 1)[0], json.dumps(obj).encode(), "application/json"
        )
        assert status == 201, answer
        paths[name] = path
    return paths


@st.composite
def patches(draw: st.DrawFn) -> tuple[str, bytes, str]:
    target = draw(st.sampled_from(sorted(PATCH_TARGETS)))
    content_type = draw(
        st.sampled_from(
            [
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/strategic-merge-patch+json",
                "application/apply-patch+yaml",
            ]
        )
    )
    if content_type == "application/json-patch+json":
        body: Any = draw(st.one_of(json_patch_ops, json_values))
    elif content_type == "application/apply-patch+yaml":
        _, base = PATCH_TARGETS[target]
        body = draw(
            st.one_of(
                merge_patches,
                st.builds(
                    lambda extra, meta: {**base, **extra, "metadata": meta},
                    st.dictionaries(patch_keys, merge_patches, max_size=3),
                    st.one_of(st.just(base["metadata"]), merge_patches),
                ),
            )
        )
        return target, yaml.safe_dump(body).encode(), content_type
    else:
        body = draw(
            st.one_of(
                merge_patches,
                st.builds(lambda spec: {"spec": spec}, st.dictionaries(patch_keys, merge_patches)),
            )
        )
    raw = json.dumps(body).encode()
    if draw(st.integers(min_value=0, max_value=6)) == 0:
        raw = raw[: draw(st.integers(min_value=0, max_value=len(raw)))]
    return target, raw, content_type


@FUZZ
@given(case=patches())
def test_patching(
    server: BackgroundServer, targets: dict[str, str], case: tuple[str, bytes, str]
) -> None:
    target, body, content_type = case
    query = "?dryRun=All"
    if content_type == "application/apply-patch+yaml":
        query += "&fieldManager=fuzz&force=true"
    server.check("PATCH", targets[target] + query, body, content_type)


selector_text = st.lists(
    st.sampled_from([*"abcxyz019-_./=!,()<> ~\\", " in ", " notin ", "é", "\x00", "\n"]),
    max_size=30,
).map("".join)


@FUZZ
@given(
    label=st.one_of(selector_text, st.text(max_size=20)),
    field=st.one_of(
        selector_text,
        st.sampled_from(
            [
                "metadata.name=x",
                "metadata.namespace!=y",
                "spec.nodeName=",
                "status.phase=Running,spec.nodeName!=n",
                "spec.unknown=x",
                "metadata.name==x",
            ]
        ),
    ),
    options=st.dictionaries(
        st.sampled_from(
            ["limit", "continue", "resourceVersion", "resourceVersionMatch", "timeoutSeconds"]
        ),
        st.one_of(st.text(max_size=12), st.integers(min_value=-5, max_value=10**12).map(str)),
        max_size=3,
    ),
    plural=st.sampled_from(["pods", "configmaps", "secrets", "events", "services"]),
)
def test_selectors_and_list_options(
    server: BackgroundServer, label: str, field: str, options: dict[str, str], plural: str
) -> None:
    query = urllib.parse.urlencode({"labelSelector": label, "fieldSelector": field, **options})
    server.check("GET", f"/api/v1/namespaces/{NAMESPACE}/{plural}?{query}")
    server.check("GET", f"/api/v1/{plural}?{query}")


@st.composite
def replacements(draw: st.DrawFn) -> tuple[str, bytes]:
    """A PUT body for an existing object: its own shape with garbage spliced in."""
    target = draw(st.sampled_from(sorted(PATCH_TARGETS)))
    _, base = PATCH_TARGETS[target]
    changes = draw(
        st.dictionaries(st.sampled_from(["spec", "data", "metadata", "x"]), merge_patches)
    )
    return target, json.dumps({**base, **changes}).encode()


@FUZZ
@given(case=replacements())
def test_updates(
    server: BackgroundServer, targets: dict[str, str], case: tuple[str, bytes]
) -> None:
    target, body = case
    server.check("PUT", f"{targets[target]}?dryRun=All", body, "application/json")


def test_what_fuzzing_found(server: BackgroundServer) -> None:
    """The two 500s the fuzzers found, kept as plain regressions."""
    reviews = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
    status, answer = server.check("POST", reviews, b"{}", "application/json")
    assert status == 422
    assert "exactly one of nonResourceAttributes or resourceAttributes" in answer["message"]
    assert "at least one of user or group must be specified" in answer["message"]
    body = json.dumps({"metadata": {"name": "w"}, "bad\nfield": 1}).encode()
    status, _ = server.check(
        "POST", f"/api/v1/namespaces/{NAMESPACE}/configmaps?dryRun=All", body, "application/json"
    )
    assert status == 201, "an unknown field named with a newline is a warning, escaped"
