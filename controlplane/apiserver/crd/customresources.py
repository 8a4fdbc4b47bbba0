"""Custom resources: what a CustomResourceDefinition makes the API server serve.

For every served version of an accepted CRD the server builds, at run time, what a built-in
kind declares in code: a ``Resource`` subclass (``msgspec.defstruct``) with typed metadata and
one free-form field per top-level property of the version's schema, whose ``set_defaults`` and
``validate`` hooks prune, default and validate against the ``openAPIV3Schema``
(``controlplane.apiserver.crd.schema``); and a ``KindInfo`` with the CRD's names, scope,
subresources and printer columns.  The generic ``ResourceStore`` then serves it unchanged, with
two differences kept in ``CustomResourceStore``: every version reads and writes the same keys
(``/registry/<group>/<plural>/...``, stored at the storage version), and defaults are applied
on read as upstream does.  Objects are converted between the stored and the requested version
as ``spec.conversion`` says (``controlplane.apiserver.crd.conversion``): strategy ``None`` rewrites
only ``apiVersion``, on the decoded struct, with no JSON round trip; strategy ``Webhook`` puts a
``ConvertingStore`` under the store, so every value read (get, a list page in one review, a
watch event) arrives at the served version and every value written leaves at the storage
version, converted by the CRD's webhook.

A ``Controller`` started with the server lists and watches the CRDs and, on every change,
(re)builds the served kinds, drops those of deleted CRDs, and reports through the status
subresource what upstream's controllers report: ``NamesAccepted`` and ``Established``,
``acceptedNames`` and ``storedVersions``.  Deleting a CRD marks it (finalizer
``customresourcecleanup.apiextensions.k8s.io``, condition ``Terminating``); the controller
deletes its objects, then removes the finalizer, and the CRD goes.

Validation rules (``x-kubernetes-validations``) are evaluated with CEL (``crd_schema`` and
``cel``), transition rules (``oldSelf``) on update.  Not done: top-level unknown fields
under a root ``x-kubernetes-preserve-unknown-fields``, selectable fields.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import json
import keyword
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from controlplane.apiserver import errors
from controlplane.apiserver.crd import conversion
from controlplane.apiserver.crd import schema as crd_schema
from controlplane.apiserver.registry.store import (
    Admission,
    RequestContext,
    ResourceStore,
    WatchEvent,
)
from controlplane.apiserver.registry.strategy import CRD_CLEANUP_FINALIZER
from controlplane.storage.interface import DELETED, KeyValue
from kube.api import openapi
from kube.api.errors import ErrorList, Path
from kube.api.kinds.apiextensions_v1 import (
    CustomResourceColumnDefinition,
    CustomResourceDefinition,
    CustomResourceDefinitionCondition,
    CustomResourceDefinitionNames,
    CustomResourceDefinitionStatus,
    CustomResourceDefinitionVersion,
    CustomResourceSubresourceScale,
)
from kube.api.meta_v1 import DeleteOptions, Resource
from kube.api.printing import NAME_COLUMN, Cell, Column, human_duration
from kube.api.scheme import SCHEME, KindInfo, version_priority
from kube.clock import Clock

log = logging.getLogger(__name__)

GROUP = "apiextensions.k8s.io"
CRD_RESOURCE = (GROUP, "v1", "customresourcedefinitions")
CLEANUP_FINALIZER = CRD_CLEANUP_FINALIZER
MANAGER = "kube-apiserver"
_META_FIELDS = ("apiVersion", "kind", "metadata")


# JSONPath (the subset printer columns and scale paths use).

_TOKEN = re.compile(
    r"""\.\.?(?P<name>[A-Za-z0-9_\-$]+)
    |\[\s*(?P<quoted>'[^']*'|"[^"]*")\s*\]
    |\[(?P<index>-?\d+)\]
    |\[(?P<star>\*)\]|\.(?P<dotstar>\*)
    |\[\?\(\s*@(?P<filter>(?:\.[A-Za-z0-9_\-]+)+)\s*(?:(?P<op>==|!=)\s*(?P<value>'[^']*'|"[^"]*"|[^)\s]+)\s*)?\)\]
    """,
    re.VERBOSE,
)


class JSONPathError(ValueError):
    """A path outside the supported subset."""


def parse_jsonpath(text: str) -> list[tuple[str, Any]]:
    """The steps of a simple JSONPath such as ``.status.conditions[?(@.type=="Ready")].status``."""
    text = text.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    text = text.removeprefix("$")
    steps: list[tuple[str, Any]] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise JSONPathError(f"unsupported JSONPath {text!r} at {position}")
        position = match.end()
        if match.group("name") is not None:
            steps.append(("field", match.group("name")))
        elif match.group("quoted") is not None:
            steps.append(("field", match.group("quoted")[1:-1]))
        elif match.group("index") is not None:
            steps.append(("index", int(match.group("index"))))
        elif match.group("star") is not None or match.group("dotstar") is not None:
            steps.append(("all", None))
        else:
            fields = match.group("filter").lstrip(".").split(".")
            value: Any = match.group("value")
            if value is not None and value[:1] in ("'", '"'):
                value = value[1:-1]
            elif value is not None:
                with contextlib.suppress(ValueError):
                    value = json.loads(value)
            steps.append(("filter", (fields, match.group("op"), value)))
    return steps


def _lookup(node: Any, fields: Sequence[str]) -> tuple[bool, Any]:
    for name in fields:
        if not isinstance(node, dict) or name not in node:
            return False, None
        node = node[name]
    return True, node


def find(data: Any, steps: Sequence[tuple[str, Any]]) -> list[Any]:
    """Every value the steps reach from ``data``."""
    nodes = [data]
    for kind, arg in steps:
        found: list[Any] = []
        for node in nodes:
            if (kind == "field" and isinstance(node, dict) and arg in node) or (
                kind == "index" and isinstance(node, list) and -len(node) <= arg < len(node)
            ):
                found.append(node[arg])
            elif kind == "all":
                if isinstance(node, list):
                    found.extend(node)
                elif isinstance(node, dict):
                    found.extend(node.values())
            elif kind == "filter" and isinstance(node, list):
                fields, op, wanted = arg
                for item in node:
                    present, value = _lookup(item, fields)
                    if present and (
                        op is None
                        or (op == "==" and value == wanted)
                        or (op == "!=" and value != wanted)
                    ):
                        found.append(item)
        nodes = found
    return nodes


def _simple_path(text: str | None) -> list[str]:
    """``.spec.replicas`` as ``["spec", "replicas"]`` (scale paths are simple)."""
    if not text:
        return []
    steps = parse_jsonpath(text)
    if any(kind != "field" for kind, _ in steps):
        raise JSONPathError(f"{text!r} is not a simple field path")
    return [str(arg) for _, arg in steps]


# Printer columns.


def _parse_time(text: str) -> datetime.datetime | None:
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=datetime.UTC)


def _string_cell(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


def cell_value(column_type: str, value: Any, now: datetime.datetime) -> Cell:
    """A cell as upstream's CRD table converter renders a JSONPath result."""
    if value is None:
        return None
    if column_type == "string":
        return _string_cell(value)
    if column_type == "integer" and isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    if column_type == "number" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if column_type == "boolean" and isinstance(value, bool):
        return value
    if column_type == "date" and isinstance(value, str):
        moment = _parse_time(value)
        return "<invalid>" if moment is None else human_duration(now - moment)
    return None


def printer_column(definition: CustomResourceColumnDefinition) -> Column:
    """A ``Column`` computing a CRD's additionalPrinterColumn."""
    path = definition.json_path or ""
    try:
        steps = parse_jsonpath(path)
    except JSONPathError:
        steps = None
    column_type = definition.type or "string"

    def cell(obj: Any, now: datetime.datetime) -> Cell:
        if steps is None:
            return None
        found = find(msgspec.to_builtins(obj), steps)
        return cell_value(column_type, found[0], now) if found else None

    return Column(
        definition.name or "",
        cell,
        type=column_type,
        format=definition.format or "",
        priority=definition.priority or 0,
        description=definition.description
        or f"Custom resource definition column (in JSONPath format): {path}",
    )


AGE = CustomResourceColumnDefinition(
    name="Age", type="date", json_path=".metadata.creationTimestamp"
)


def columns(version: CustomResourceDefinitionVersion) -> tuple[Column, ...]:
    """NAME, then the version's additionalPrinterColumns (or AGE when it has none)."""
    defined = version.additional_printer_columns or [AGE]
    return (NAME_COLUMN, *(printer_column(d) for d in defined))


# Classes.


def schema_of(version: CustomResourceDefinitionVersion) -> crd_schema.Schema:
    """A version's openAPIV3Schema as plain JSON (an open object when it has none)."""
    schema = version.schema.open_api_v3_schema if version.schema is not None else None
    if schema is None:
        return {"type": "object", crd_schema.PRESERVE: True}
    built: crd_schema.Schema = msgspec.to_builtins(schema)
    return built


def _body_schema(schema: crd_schema.Schema) -> crd_schema.Schema:
    """The root schema without apiVersion, kind and metadata (the struct handles those)."""
    body = dict(schema)
    body["properties"] = {
        k: v for k, v in (schema.get("properties") or {}).items() if k not in _META_FIELDS
    }
    body["required"] = [r for r in schema.get("required") or () if r not in _META_FIELDS]
    body.pop(crd_schema.PRESERVE, None)
    return body


_RESERVED = frozenset(dir(Resource)) | {
    "prune_unknown",
    "scale_fields",
    "set_scale_replicas",
    "custom_body",
}


def make_class(
    group: str,
    version: str,
    kind: str,
    schema: crd_schema.Schema,
    scale: CustomResourceSubresourceScale | None = None,
) -> type[Resource]:
    """A ``Resource`` subclass for one version of a custom resource."""
    body_schema = _body_schema(schema)
    attrs: dict[str, str] = {}
    for i, name in enumerate(body_schema["properties"]):
        usable = name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("_")
        attrs[f"field_{i}" if not usable or name in _RESERVED else name] = name
    fields = [(attr, Any, msgspec.field(default=None, name=name)) for attr, name in attrs.items()]

    def custom_body(self: Any) -> dict[str, Any]:
        return {
            name: getattr(self, attr)
            for attr, name in attrs.items()
            if getattr(self, attr) is not None
        }

    def store_body(self: Any, body: dict[str, Any]) -> None:
        for attr, name in attrs.items():
            setattr(self, attr, body.get(name))

    def prune_unknown(self: Any) -> list[str]:
        body = custom_body(self)
        dropped = crd_schema.prune(body, body_schema)
        store_body(self, body)
        return dropped

    def set_defaults(self: Any) -> None:
        body = custom_body(self)
        crd_schema.prune(body, body_schema)
        crd_schema.default(body, body_schema)
        store_body(self, body)

    def validate(self: Any, path: Path, errors: ErrorList) -> None:
        crd_schema.validate(custom_body(self), body_schema, path, errors)

    def validate_update(self: Any, old: Any, errors: ErrorList) -> None:
        """Transition rules (those reading ``oldSelf``) need the object being replaced."""
        crd_schema.validate_transitions(
            custom_body(self), custom_body(old), body_schema, Path(), errors
        )

    namespace: dict[str, Any] = {
        "custom_body": custom_body,
        "prune_unknown": prune_unknown,
        "set_defaults": set_defaults,
        "validate": validate,
        "validate_update": validate_update,
    }
    if scale is not None:
        spec_path = _simple_path(scale.spec_replicas_path)
        status_path = _simple_path(scale.status_replicas_path)
        selector_path = _simple_path(scale.label_selector_path)

        def scale_fields(self: Any) -> tuple[int | None, int, str | None]:
            body = custom_body(self)
            _, replicas = _lookup(body, spec_path)
            _, current = _lookup(body, status_path) if status_path else (False, None)
            _, selector = _lookup(body, selector_path) if selector_path else (False, None)
            return (
                int(replicas) if isinstance(replicas, int | float) else 0,
                int(current) if isinstance(current, int | float) else 0,
                selector if isinstance(selector, str) else None,
            )

        def set_scale_replicas(self: Any, replicas: int | None) -> None:
            body = custom_body(self)
            node = body
            for name in spec_path[:-1]:
                child = node.get(name)
                if not isinstance(child, dict):
                    child = node[name] = {}
                node = child
            node[spec_path[-1]] = replicas
            store_body(self, body)

        namespace["scale_fields"] = scale_fields
        namespace["set_scale_replicas"] = set_scale_replicas
    cls: type[Resource] = msgspec.defstruct(  # type: ignore[assignment]
        kind,
        fields,
        bases=(Resource,),
        module=f"kubelab.custom.{group}.{version}",
        namespace=namespace,
    )
    cls.API_VERSION = f"{group}/{version}"
    cls.KIND = kind
    return cls


@dataclass(frozen=True)
class ServedVersion:
    """One served version of a CRD: its kind and the version objects are stored at."""

    info: KindInfo
    storage_version: str
    deprecation_warning: str | None


def served_versions(
    crd: CustomResourceDefinition, all_versions: bool = False
) -> list[ServedVersion]:
    """The kinds a CRD serves (``all_versions``: its storage version too, served or not),
    preferred version first."""
    spec = crd.spec
    if spec is None or spec.names is None or not spec.group:
        return []
    names = spec.names
    kind = names.kind or ""
    storage = next((v.name for v in spec.versions or () if v.storage), None)
    if not kind or not names.plural or storage is None:
        return []
    result = []
    versions = sorted(spec.versions or (), key=lambda v: version_priority(v.name or ""))
    for version in versions:
        if not version.name or not (version.served or (all_versions and version.name == storage)):
            continue
        subresources = version.subresources
        scale = subresources.scale if subresources is not None else None
        schema = schema_of(version)
        cls = make_class(spec.group, version.name, kind, schema, scale)
        info = KindInfo(
            group=spec.group,
            version=version.name,
            kind=kind,
            plural=names.plural,
            singular=names.singular or kind.lower(),
            namespaced=spec.scope != "Cluster",
            cls=cls,
            short_names=tuple(names.short_names or ()),
            categories=tuple(names.categories or ()),
            subresources=tuple(
                name
                for name, present in (
                    ("status", subresources is not None and subresources.status is not None),
                    ("scale", scale is not None),
                )
                if present
            ),
            columns=columns(version),
        )
        cls.kind_info = info
        setattr(cls, openapi.CUSTOM_SCHEMA, schema)
        warning = None
        if version.deprecated:
            warning = (
                version.deprecation_warning or f"{spec.group}/{version.name} {kind} is deprecated"
            )
        result.append(ServedVersion(info, storage, warning))
    return result


class CustomResourceStore(ResourceStore):
    """A ResourceStore for one version of a custom resource (see the module docstring)."""

    def __init__(
        self,
        served: ServedVersion,
        template: ResourceStore,
        admission: Sequence[Admission],
        converter: conversion.Converter | None = None,
    ) -> None:
        super().__init__(
            served.info,
            template.store,
            template.clock,
            admission,
            track_fields=template.track_fields,
        )
        group = served.info.group
        self.storage_api_version = f"{group}/{served.storage_version}"
        self._known = frozenset(served.info.cls.__struct_encode_fields__)
        converter = converter or conversion.NoneConverter()
        self.converter = converter
        """Between this CRD's versions (admission sends webhooks equivalent versions)."""
        # Strategy None rewrites apiVersion here, in encode and decode; any other converts
        # every value between this store and the backend.
        self._rewrite = converter.strategy == "None"
        if not self._rewrite:
            self.store = conversion.ConvertingStore(
                template.store, converter, served.info.api_version, self.storage_api_version
            )

    def encode(self, obj: Resource) -> bytes:
        if not self._rewrite:
            return super().encode(obj)
        version = obj.api_version
        obj.api_version = self.storage_api_version
        try:
            return super().encode(obj)
        finally:
            obj.api_version = version

    def decode(self, kv: KeyValue) -> Resource:
        raw = msgspec.json.decode(kv.value)
        if isinstance(raw, dict):
            raw = {k: v for k, v in raw.items() if k in self._known}
            raw["apiVersion"] = self.info.api_version
        obj: Resource = msgspec.convert(raw, self.info.cls)
        obj.set_defaults()
        obj.metadata.resource_version = str(kv.mod_revision)
        return obj


# The controller.


@dataclass
class _Served:
    fingerprint: bytes
    group: str
    plural: str
    kind: str
    keys: list[tuple[str, str, str]]


def _condition(
    status: CustomResourceDefinitionStatus,
    type_: str,
    value: str,
    reason: str,
    message: str,
    now: datetime.datetime,
) -> None:
    conditions = status.conditions = status.conditions or []
    for condition in conditions:
        if condition.type == type_:
            if condition.status != value:
                condition.status = value
                condition.last_transition_time = now
            condition.reason, condition.message = reason, message
            return
    conditions.append(
        CustomResourceDefinitionCondition(
            type=type_,
            status=value,
            last_transition_time=now,
            reason=reason,
            message=message,
        )
    )


def accepted_names(names: CustomResourceDefinitionNames) -> CustomResourceDefinitionNames:
    kind = names.kind or ""
    return CustomResourceDefinitionNames(
        plural=names.plural,
        singular=names.singular or kind.lower(),
        short_names=names.short_names,
        kind=kind,
        list_kind=names.list_kind or f"{kind}List",
        categories=names.categories,
    )


class ServedKinds(Protocol):
    """What the controller needs of the server: the kinds served, to which it adds (and from
    which it removes) the custom ones."""

    @property
    def stores(self) -> Mapping[tuple[str, str, str], ResourceStore]: ...

    def add_store(self, store: ResourceStore) -> None: ...

    def remove_store(self, key: tuple[str, str, str]) -> None: ...


class Controller:
    """Serves the kinds of the CRDs in storage, and keeps their status (module docstring)."""

    def __init__(self, kinds: ServedKinds, clock: Clock) -> None:
        self.kinds = kinds
        self.clock = clock
        crds = kinds.stores[CRD_RESOURCE]
        self.crds = crds
        self.served: dict[str, _Served] = {}
        self.terminating: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._cleanups: dict[str, asyncio.Task[None]] = {}

    def _ctx(self) -> RequestContext:
        return RequestContext(
            user="system:apiserver", groups=("system:masters",), field_manager=MANAGER
        )

    async def start(self) -> None:
        """Serve what the stored CRDs define, then follow their changes."""
        revision = await self._resync()
        self._task = asyncio.create_task(self._run(revision), name="crd-controller")

    def stop(self) -> None:
        for task in [self._task, *self._cleanups.values()]:
            if task is not None:
                task.cancel()

    async def _resync(self) -> str:
        listed = await self.crds.list()
        present = {crd.metadata.name or "" for crd in listed.items}
        for name in list(self.served):
            if name not in present:
                self._remove(name)
        for crd in listed.items:
            assert isinstance(crd, CustomResourceDefinition)
            await self._sync(crd)
        return listed.metadata.resource_version or "0"

    async def _run(self, revision: str | None) -> None:
        while True:
            try:
                if revision is None:
                    revision = await self._resync()
                async for event in self.crds.watch(resource_version=revision, send_initial=False):
                    revision = str(event.revision)
                    await self._handle(event)
                revision = None
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("watching CustomResourceDefinitions failed; listing again")
                revision = None
                await asyncio.sleep(1)

    async def _handle(self, event: WatchEvent) -> None:
        crd = event.obj
        if not isinstance(crd, CustomResourceDefinition):
            return
        if event.type == DELETED:
            self._remove(crd.metadata.name or "")
        else:
            await self._sync(crd)

    # Serving.

    def _remove(self, name: str) -> None:
        self.terminating.discard(name)
        served = self.served.pop(name, None)
        if served is not None:
            for key in served.keys:
                self.kinds.remove_store(key)

    def _conflict(self, crd: CustomResourceDefinition) -> tuple[str, str] | None:
        """(reason, message) when another kind already answers to the CRD's names."""
        spec = crd.spec
        names = spec.names if spec is not None else None
        if spec is None or names is None:
            return None
        for name, other in self.served.items():
            if name == crd.metadata.name or other.group != spec.group:
                continue
            if other.plural == names.plural:
                return "PluralConflict", f'"{names.plural}" is already in use'
            if other.kind == names.kind:
                return "KindConflict", f'"{names.kind}" is already in use'
        for version in spec.versions or ():
            if SCHEME.by_resource(spec.group or "", version.name or "", names.plural or ""):
                return "PluralConflict", f'"{names.plural}" is already in use'
        return None

    def _install(self, crd: CustomResourceDefinition) -> None:
        name = crd.metadata.name or ""
        spec = crd.spec
        assert spec is not None and spec.names is not None
        fingerprint = msgspec.json.encode(spec)
        current = self.served.get(name)
        if current is not None and current.fingerprint == fingerprint:
            return
        versions = served_versions(crd)
        converter = self._converter(crd)
        keys = []
        for served in versions:
            info = served.info
            store = CustomResourceStore(served, self.crds, self._admission(name, served), converter)
            key = (info.group, info.version, info.plural)
            self.kinds.add_store(store)
            keys.append(key)
        for key in current.keys if current is not None else ():
            if key not in keys:
                self.kinds.remove_store(key)
        self.served[name] = _Served(
            fingerprint, spec.group or "", spec.names.plural or "", spec.names.kind or "", keys
        )

    def _converter(self, crd: CustomResourceDefinition) -> conversion.Converter:
        """The CRD's converter; its service references resolve through our own stores."""
        resolve = functools.partial(conversion.resolve_service, self.kinds.stores)
        return conversion.new_converter(crd, resolve)

    def _admission(self, crd_name: str, served: ServedVersion) -> list[Admission]:
        async def admit(
            operation: str,
            info: KindInfo,
            obj: Resource,
            old: Resource | None,
            ctx: RequestContext,
        ) -> None:
            if operation == "CREATE" and crd_name in self.terminating:
                raise errors.method_not_allowed(
                    "create not allowed while custom resource definition is terminating"
                )
            if served.deprecation_warning and served.deprecation_warning not in ctx.warnings:
                ctx.warnings.append(served.deprecation_warning)

        return [admit, *self.crds.admission]

    async def _sync(self, crd: CustomResourceDefinition) -> None:
        name = crd.metadata.name or ""
        try:
            if crd.metadata.deletion_timestamp is not None:
                self.terminating.add(name)
                await self._write_status(crd, None, terminating=True)
                finalizers = crd.metadata.finalizers or ()
                if CLEANUP_FINALIZER in finalizers and name not in self._cleanups:
                    self._cleanups[name] = asyncio.create_task(
                        self._cleanup(crd), name=f"crd-cleanup-{name}"
                    )
                return
            conflict = self._conflict(crd)
            if conflict is None:
                self._install(crd)
            await self._write_status(crd, conflict, terminating=False)
        except errors.ApiError as error:
            if error.code != 404:
                log.warning("CustomResourceDefinition %s: %s", name, error)

    async def _write_status(
        self,
        crd: CustomResourceDefinition,
        conflict: tuple[str, str] | None,
        terminating: bool,
    ) -> None:
        now = self.clock.now().replace(microsecond=0)

        def change(current: Resource) -> Resource:
            assert isinstance(current, CustomResourceDefinition)
            status = current.status or CustomResourceDefinitionStatus()
            spec = current.spec
            if terminating:
                _condition(
                    status,
                    "Terminating",
                    "True",
                    "InstanceDeletionInProgress",
                    "CustomResource deletion is in progress",
                    now,
                )
            elif conflict is None:
                _condition(
                    status, "NamesAccepted", "True", "NoConflicts", "no conflicts found", now
                )
                _condition(
                    status,
                    "Established",
                    "True",
                    "InitialNamesAccepted",
                    "the initial names have been accepted",
                    now,
                )
                if spec is not None and spec.names is not None:
                    status.accepted_names = accepted_names(spec.names)
            else:
                _condition(status, "NamesAccepted", "False", conflict[0], conflict[1], now)
                if not any(
                    c.type == "Established" and c.status == "True" for c in status.conditions or ()
                ):
                    _condition(
                        status,
                        "Established",
                        "False",
                        "NotAccepted",
                        "not all names are accepted",
                        now,
                    )
            storage = next(
                (v.name for v in (spec.versions if spec else None) or () if v.storage), None
            )
            stored = list(status.stored_versions or [])
            if storage is not None and storage not in stored:
                stored.append(storage)
            status.stored_versions = stored or None
            current.status = status
            return current

        await self.crds.mutate("", crd.metadata.name or "", change, self._ctx(), "status")

    async def _cleanup(self, crd: CustomResourceDefinition) -> None:
        """Delete every object of a terminating CRD, then let the CRD go."""
        name = crd.metadata.name or ""
        try:
            versions = served_versions(crd, all_versions=True)
            storage = next(
                (s for s in versions if s.info.version == s.storage_version),
                versions[0] if versions else None,
            )
            if storage is not None:
                store = CustomResourceStore(storage, self.crds, [], self._converter(crd))
                while True:
                    listed = await store.list()
                    if not listed.items:
                        break
                    for obj in listed.items:
                        try:
                            await store.delete(
                                obj.metadata.namespace or "",
                                obj.metadata.name or "",
                                DeleteOptions(),
                                self._ctx(),
                            )
                        except errors.ApiError as error:
                            if error.code != 404:
                                raise
                    await asyncio.sleep(0.2)

            def release(current: Resource) -> Resource:
                finalizers = [
                    f for f in current.metadata.finalizers or () if f != CLEANUP_FINALIZER
                ]
                current.metadata.finalizers = finalizers or None
                return current

            await self.crds.mutate("", name, release, self._ctx())
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("cleaning up the custom resources of %s failed", name)
        finally:
            self._cleanups.pop(name, None)


def scale_fields(obj: Resource) -> tuple[int | None, int, str | None] | None:
    """(spec replicas, status replicas, selector) of a custom resource with a scale
    subresource, or None for other kinds."""
    read: Callable[[], tuple[int | None, int, str | None]] | None = getattr(
        obj, "scale_fields", None
    )
    return read() if read is not None else None


def set_scale_replicas(obj: Resource, replicas: int | None) -> bool:
    """Set the replicas of a custom resource with a scale subresource (False: not one)."""
    write: Callable[[int | None], None] | None = getattr(obj, "set_scale_replicas", None)
    if write is None:
        return False
    write(replicas)
    return True


def unknown_fields(obj: Any, unknown: list[str]) -> list[str]:
    """The unknown fields of a decoded body, with what a custom resource's schema prunes."""
    prune: Callable[[], list[str]] | None = getattr(obj, "prune_unknown", None)
    return unknown + prune() if prune is not None else unknown


__all__ = [
    "CLEANUP_FINALIZER",
    "Controller",
    "CustomResourceStore",
    "find",
    "make_class",
    "parse_jsonpath",
    "scale_fields",
    "served_versions",
    "set_scale_replicas",
    "unknown_fields",
]
