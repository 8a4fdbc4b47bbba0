"""OpenAPI v3 documents generated from the declarations, one per group-version.

kubectl reads them for two things: ``kubectl explain`` (schemas, descriptions, follows
``$ref``s from the schema whose ``x-kubernetes-group-version-kind`` names the kind) and the
decision to let the server validate fields (a PATCH operation carrying a ``fieldValidation``
parameter).  So each document has real schemas for every struct reachable from the
group-version's kinds, with the Kubernetes extensions (merge keys, list types, GVK), and paths
for every served resource.

Schemas are named as upstream names them (``io.k8s.api.core.v1.Pod``,
``io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta``) so tools that know those names find them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec
from msgspec import inspect as mi

from kube import KUBERNETES_VERSION
from kube.api.meta_v1 import ObjectMeta
from kube.api.scheme import SCHEME, KindInfo
from kube.api.struct import QUANTITY, Struct, field_meta

Schema = dict[str, Any]

_META_MODULE = "kube.api.meta_v1"
_KINDS_PREFIX = "kube.api.kinds."
_GROUP_PACKAGES = {"apiextensions": "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions"}


def schema_name(cls: type) -> str:
    """The upstream-style component name of a struct class."""
    module = cls.__module__
    if module == _META_MODULE:
        return f"io.k8s.apimachinery.pkg.apis.meta.v1.{cls.__name__}"
    if module.startswith(_KINDS_PREFIX):
        group_version = module[len(_KINDS_PREFIX) :].split(".")[0]
        group, _, version = group_version.rpartition("_")
        package = _GROUP_PACKAGES.get(group, f"io.k8s.api.{group}")
        return f"{package}.{version}.{cls.__name__}"
    return f"io.kubelab.{module}.{cls.__name__}"


def _ref(cls: type) -> Schema:
    return {"$ref": f"#/components/schemas/{schema_name(cls)}"}


class _Builder:
    """Collects the component schemas reachable from a set of kinds."""

    def __init__(self) -> None:
        self.schemas: dict[str, Schema] = {}

    def custom(self, info: KindInfo, schema: Schema) -> Schema:
        """A kind defined by a JSON schema of its own (a custom resource's CRD version)."""
        reversed_group = ".".join(reversed(info.group.split(".")))
        name = f"{reversed_group}.{info.version}.{info.kind}"
        body = dict(schema)
        body["properties"] = {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            **(schema.get("properties") or {}),
            "metadata": self.struct(ObjectMeta),
        }
        body["x-kubernetes-group-version-kind"] = [
            {"group": info.group, "version": info.version, "kind": info.kind}
        ]
        self.schemas[name] = body
        return {"$ref": f"#/components/schemas/{name}"}

    def struct(self, cls: type[Struct]) -> Schema:
        name = schema_name(cls)
        if name not in self.schemas:
            self.schemas[name] = {}  # placeholder: recursive types refer to themselves
            self.schemas[name] = self._object(cls)
        return _ref(cls)

    def _object(self, cls: type[Struct]) -> Schema:
        info = mi.type_info(cls)
        assert isinstance(info, mi.StructType)
        properties: dict[str, Schema] = {}
        required: list[str] = []
        for f in info.fields:
            properties[f.encode_name] = self.type(f.type)
            if isinstance(f.type, mi.Metadata) and field_meta(f.type.extra).required:
                required.append(f.encode_name)
        schema: Schema = {"type": "object", "properties": properties}
        if cls.__doc__:
            schema["description"] = " ".join(cls.__doc__.split())
        if required:
            schema["required"] = required
        kind_info = getattr(cls, "kind_info", None)
        if isinstance(kind_info, KindInfo) and kind_info.cls is cls:
            schema["x-kubernetes-group-version-kind"] = [
                {"group": kind_info.group, "version": kind_info.version, "kind": kind_info.kind}
            ]
        return schema

    def type(self, t: mi.Type) -> Schema:
        if isinstance(t, mi.Metadata):
            schema = self.type(t.type)
            info = field_meta(t.extra)
            if info.format == QUANTITY:
                schema = {"x-kubernetes-int-or-string": True, "format": "quantity"}
            extensions = {
                "x-kubernetes-patch-strategy": info.patch_strategy,
                "x-kubernetes-patch-merge-key": info.patch_merge_key,
                "x-kubernetes-list-type": info.list_type,
                "x-kubernetes-list-map-keys": list(info.list_map_keys or ()) or None,
                "x-kubernetes-map-type": info.map_type,
                "enum": list(info.enum) if info.enum else None,
                "description": (t.extra_json_schema or {}).get("description"),
            }
            if "$ref" in schema and any(v is not None for v in extensions.values()):
                schema = {"allOf": [schema]}
            schema.update({k: v for k, v in extensions.items() if v is not None})
            if info.preserve_unknown:
                schema["x-kubernetes-preserve-unknown-fields"] = True
            return schema
        if isinstance(t, mi.UnionType):
            members = [m for m in t.types if not isinstance(m, mi.NoneType)]
            kinds = {type(m) for m in members}
            if kinds == {mi.IntType, mi.StrType}:
                return {"x-kubernetes-int-or-string": True}
            if len(members) == 1:
                return self.type(members[0])
            return {"anyOf": [self.type(m) for m in members]}
        if isinstance(t, mi.StructType) and issubclass(t.cls, Struct):
            return self.struct(t.cls)
        if isinstance(t, mi.ListType):
            return {"type": "array", "items": self.type(t.item_type)}
        if isinstance(t, mi.DictType):
            return {"type": "object", "additionalProperties": self.type(t.value_type)}
        return _scalar(t)


def _scalar(t: mi.Type) -> Schema:
    if isinstance(t, mi.StrType):
        return {"type": "string"}
    if isinstance(t, mi.BoolType):
        return {"type": "boolean"}
    if isinstance(t, mi.IntType):
        return {"type": "integer", "format": "int64"}
    if isinstance(t, mi.FloatType):
        return {"type": "number", "format": "double"}
    if isinstance(t, mi.DateTimeType):
        return {"type": "string", "format": "date-time"}
    if isinstance(t, mi.BytesType):
        return {"type": "string", "format": "byte"}
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


_WRITE_PARAMETERS = [
    {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
    {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
    {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
]


PATCH_SCHEMA_NAME = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
PATCH_SCHEMA: Schema = {
    "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH "
    "request body.",
    "type": "object",
}
PATCH_TYPES = (
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
)
"""What a PATCH body may be; custom resources take all but the strategic merge patch."""


def _patch_body(strategic: bool) -> Schema:
    schema = {"$ref": f"#/components/schemas/{PATCH_SCHEMA_NAME}"}
    types = PATCH_TYPES if strategic else PATCH_TYPES[:-1]
    return {"content": {media: {"schema": schema} for media in types}, "required": True}


def _operation(
    info: KindInfo, action: str, ref: Schema, body: Schema | None = None, write: bool = False
) -> Schema:
    """An operation on the kind (``ref`` its schema); ``body`` its request body, if any;
    ``write``: it takes the write parameters."""
    op: Schema = {
        "operationId": f"{action}{info.kind}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {
            "group": info.group,
            "version": info.version,
            "kind": info.kind,
        },
        "responses": {"200": {"content": {"application/json": {"schema": ref}}}},
    }
    if write:
        op["parameters"] = list(_WRITE_PARAMETERS)
    if body is not None:
        op["requestBody"] = body
    return op


def _paths(info: KindInfo, ref: Schema, *, strategic: bool) -> dict[str, Schema]:
    base = f"/api/{info.version}" if not info.group else f"/apis/{info.api_version}"
    collection = (
        f"{base}/namespaces/{{namespace}}/{info.plural}"
        if info.namespaced
        else f"{base}/{info.plural}"
    )
    item = collection + "/{name}"
    verbs = set(info.verbs)
    whole = {"content": {"*/*": {"schema": ref}}, "required": True}
    coll: Schema = {}
    one: Schema = {}
    if "list" in verbs:
        coll["get"] = _operation(info, "list", ref)
    if "create" in verbs:
        coll["post"] = _operation(info, "post", ref, whole, write=True)
    if "deletecollection" in verbs:
        coll["delete"] = _operation(info, "deletecollection", ref)
    if "get" in verbs:
        one["get"] = _operation(info, "get", ref)
    if "update" in verbs:
        one["put"] = _operation(info, "put", ref, whole, write=True)
    if "patch" in verbs:
        one["patch"] = _operation(info, "patch", ref, _patch_body(strategic), write=True)
    if "delete" in verbs:
        one["delete"] = _operation(info, "delete", ref)
    return {path: ops for path, ops in ((collection, coll), (item, one)) if ops}


def group_version_path(group: str, version: str) -> str:
    """The key of a group-version in the ``/openapi/v3`` root (``api/v1``, ``apis/apps/v1``)."""
    return f"api/{version}" if not group else f"apis/{group}/{version}"


CUSTOM_SCHEMA = "openapi_schema"
"""Attribute of a kind's class holding its own JSON schema (custom resources)."""


def document(group: str, version: str, kinds: Iterable[KindInfo] | None = None) -> Schema:
    """The OpenAPI v3 document of one group-version of ``kinds`` (default: the scheme)."""
    builder = _Builder()
    paths: dict[str, Schema] = {}
    for info in SCHEME if kinds is None else kinds:
        if info.group_version != (group, version):
            continue
        custom = getattr(info.cls, CUSTOM_SCHEMA, None)
        ref = builder.custom(info, custom) if custom is not None else builder.struct(info.cls)
        paths.update(_paths(info, ref, strategic=custom is None))
        if "patch" in info.verbs:
            builder.schemas[PATCH_SCHEMA_NAME] = PATCH_SCHEMA
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": f"v{KUBERNETES_VERSION}"},
        "paths": paths,
        "components": {"schemas": builder.schemas},
    }


def encoded_document(group: str, version: str, kinds: Iterable[KindInfo] | None = None) -> bytes:
    """``document`` as served: the JSON bytes that ``document_hash`` names."""
    return msgspec.json.encode(document(group, version, kinds))


def document_hash(data: bytes) -> str:
    """The content hash of an encoded document, the ``?hash=`` of its link in the v3 root
    (clients cache a document by it)."""
    return hashlib.sha512(data).hexdigest()[:32].upper()


def root(hashes: Mapping[tuple[str, str], str]) -> Schema:
    """The ``/openapi/v3`` root linking the document of each group-version, by its hash."""
    paths = {}
    for group, version in sorted(hashes, key=lambda gv: (gv[0] != "", gv)):
        key = group_version_path(group, version)
        paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={hashes[group, version]}"}
    return {"paths": paths}


def _v2_refs(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            # A schema may have a property literally named "$ref" (JSONSchemaProps does): only
            # a string value is a reference.
            k: (
                v.replace("#/components/schemas/", "#/definitions/")
                if k == "$ref" and isinstance(v, str)
                else _v2_refs(v)
            )
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_v2_refs(v) for v in node]
    return node


def swagger_v2() -> Schema:
    """``/openapi/v2``: every schema as Swagger 2.0 definitions (for clients that want v2)."""
    definitions: dict[str, Schema] = {}
    for group, version in SCHEME.group_versions():
        definitions.update(document(group, version)["components"]["schemas"])
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": f"v{KUBERNETES_VERSION}"},
        "paths": {},
        "definitions": _v2_refs(definitions),
    }
