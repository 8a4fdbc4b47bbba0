"""The scheme: every kind the project serves, registered once, found by any of its names.

A kind module declares its top-level type and decorates it with ``@kind(...)``: group, version,
plural, scope, short names, categories, subresources, verbs, printer columns, the field
selectors it supports and the rule its names follow.  The API server builds discovery, routing,
OpenAPI and tables from these records; clients resolve ``deploy`` or ``deployments.apps`` with
them.  Importing ``kube.api.kinds`` registers everything.

One resource may be served in several versions (HorizontalPodAutoscaler in autoscaling/v2 and
v1), as upstream serves it: every version is a kind of its own, registered with the version its
objects are stored at (``storage_version``), and the module of the older version registers the
two conversions between its class and the storage version's with ``conversion``.  The store
then keeps one copy of each object, at the storage version, and every version reads and writes
it (``Scheme.convert``); discovery prefers the version of highest priority
(``version_priority``: GA before beta before alpha, higher numbers first).

A resource may even be served in two groups over one storage: events.k8s.io/v1 Events are core
v1 Events, stored under core's key (``storage_group``), as upstream stores them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from kube.api.printing import DEFAULT_COLUMNS, Column
from kube.api.struct import DNS1123_SUBDOMAIN

if TYPE_CHECKING:
    from kube.api.meta_v1 import Resource

STANDARD_VERBS = (
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
)
CREATE_ONLY = ("create",)
NOT_SERVED = ()
"""Verbs of a kind that only travels through a subresource (autoscaling/v1 Scale)."""

PATH_SEGMENT = "path-segment"
"""Name rule of kinds whose names only need to be a valid URL path segment (RBAC roles)."""

FieldGetter = Callable[[Any], str | None]


@dataclass(frozen=True)
class KindInfo:
    """How one kind is served."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    cls: type[Resource]
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = STANDARD_VERBS
    columns: tuple[Column, ...] = DEFAULT_COLUMNS
    field_selectors: Mapping[str, FieldGetter] = field(default_factory=dict)
    name_format: str = DNS1123_SUBDOMAIN
    storage_version: str = ""
    """The version objects of this resource are stored at; empty: this kind's own."""
    storage_group: str | None = None
    """The group objects of this resource are stored in; None: this kind's own."""
    deprecated_since: str = ""
    """The release that deprecated this kind (``1.19``): every request to it is answered with
    upstream's warning, "v1 ComponentStatus is deprecated in v1.19+"."""
    returns_deleted: bool = False
    """A delete answers with the deleted object rather than a Status (upstream's
    ``ReturnDeletedObject``; its OpenAPI, and so the clients generated from it, expect it)."""
    aggregated: bool = False
    """Served by an extension API server behind an APIService (metrics.k8s.io, by the
    metrics-server), never by the API server itself: declared here so that servers and clients
    share one type, left out of ``Scheme.served`` and ``Scheme.group_versions``."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def stored_group(self) -> str:
        return self.group if self.storage_group is None else self.storage_group

    @property
    def storage_api_version(self) -> str:
        version = self.storage_version or self.version
        group = self.stored_group
        return f"{group}/{version}" if group else version

    @property
    def group_version(self) -> tuple[str, str]:
        return (self.group, self.version)

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def group_resource(self) -> str:
        """``deployments.apps``, or ``pods`` for the core group: how messages name it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def deprecation(self) -> str | None:
        """Upstream's warning for requests to a deprecated kind (None: not deprecated)."""
        if not self.deprecated_since:
            return None
        return f"{self.api_version} {self.kind} is deprecated in v{self.deprecated_since}+"

    def selectable_fields(self, obj: Any) -> dict[str, str]:
        """The values of every field this kind can be selected by (``metadata.name`` always)."""
        values = {"metadata.name": obj.metadata.name or ""}
        if self.namespaced:
            values["metadata.namespace"] = obj.metadata.namespace or ""
        for name, getter in self.field_selectors.items():
            got = getter(obj)
            values[name] = "" if got is None else got
        return values

    def supports_field(self, name: str) -> bool:
        if name == "metadata.name" or (self.namespaced and name == "metadata.namespace"):
            return True
        return name in self.field_selectors


class SchemeError(LookupError):
    """A kind registered twice, or looked up by a name nothing answers to."""


_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(name: str) -> tuple[int, int, int, str]:
    """A sort key putting the version clients should prefer first (upstream's priority)."""
    match = _VERSION.match(name)
    if match is None:
        return (3, 0, 0, name)
    major, level, minor = match.groups()
    rank = {None: 0, "beta": 1, "alpha": 2}[level]
    return (rank, -int(major), -int(minor or 0), name)


T = TypeVar("T")
Conversion = Callable[[Any], Any]
"""Turns an object of one version of a resource into another version of it (a new object)."""


class Scheme:
    """All registered kinds, indexed by class, by (apiVersion, kind) and by resource."""

    def __init__(self) -> None:
        self._by_class: dict[type[Any], KindInfo] = {}
        self._by_kind: dict[tuple[str, str], KindInfo] = {}
        self._by_resource: dict[tuple[str, str, str], KindInfo] = {}
        self._conversions: dict[tuple[type[Any], type[Any]], Conversion] = {}

    def register(self, info: KindInfo) -> None:
        key = (info.api_version, info.kind)
        if key in self._by_kind:
            raise SchemeError(f"kind {info.kind} in {info.api_version} is registered twice")
        self._by_class[info.cls] = info
        self._by_kind[key] = info
        if info.verbs:
            self._by_resource[(info.group, info.version, info.plural)] = info

    def add_conversion(self, source: type[Any], target: type[Any], convert: Conversion) -> None:
        """Register how objects of ``source`` become objects of ``target``."""
        self._conversions[(source, target)] = convert

    def convert(self, obj: Any, target: type[T]) -> T:
        """``obj`` as an object of ``target``: itself if it already is one."""
        if type(obj) is target:
            return obj
        try:
            convert = self._conversions[(type(obj), target)]
        except KeyError:
            raise SchemeError(
                f"no conversion from {type(obj).__name__} to {target.__name__}"
            ) from None
        converted: T = convert(obj)
        return converted

    def storage_class(self, info: KindInfo) -> type[Resource]:
        """The class objects of ``info``'s resource are stored as."""
        if info.storage_api_version == info.api_version:
            return info.cls
        stored = self.by_kind(info.storage_api_version, info.kind)
        if stored is None:
            raise SchemeError(f"{info.kind} has no storage version {info.storage_api_version}")
        return stored.cls

    def for_class(self, cls: type[Any]) -> KindInfo:
        try:
            return self._by_class[cls]
        except KeyError:
            raise SchemeError(f"{cls.__name__} is not a registered kind") from None

    def by_kind(self, api_version: str, kind: str) -> KindInfo | None:
        return self._by_kind.get((api_version, kind))

    def by_resource(self, group: str, version: str, plural: str) -> KindInfo | None:
        return self._by_resource.get((group, version, plural))

    def __iter__(self) -> Iterator[KindInfo]:
        return iter(self._by_kind.values())

    def served(self) -> Iterator[KindInfo]:
        """Kinds the API server serves at a resource path of their own, in registration order
        (not the aggregated ones)."""
        return (info for info in self._by_resource.values() if not info.aggregated)

    def group_versions(self) -> list[tuple[str, str]]:
        """Every (group, version) with a kind the API server serves, core first, in
        registration order."""
        seen: dict[tuple[str, str], None] = {}
        for info in self._by_kind.values():
            if not info.aggregated:
                seen.setdefault(info.group_version, None)
        return sorted(seen, key=lambda gv: gv[0] != "")


SCHEME = Scheme()

R = TypeVar("R", bound="type[Resource]")


def kind(
    *,
    group: str,
    version: str,
    plural: str,
    namespaced: bool = True,
    singular: str | None = None,
    short_names: tuple[str, ...] = (),
    categories: tuple[str, ...] = (),
    subresources: tuple[str, ...] = (),
    verbs: tuple[str, ...] = STANDARD_VERBS,
    columns: tuple[Column, ...] = DEFAULT_COLUMNS,
    field_selectors: Mapping[str, FieldGetter] | None = None,
    name_format: str = DNS1123_SUBDOMAIN,
    storage_version: str = "",
    storage_group: str | None = None,
    deprecated_since: str = "",
    returns_deleted: bool = False,
    aggregated: bool = False,
) -> Callable[[R], R]:
    """Register the decorated class as a kind served at ``group/version/plural``."""

    def register(cls: R) -> R:
        info = KindInfo(
            group=group,
            version=version,
            kind=cls.__name__,
            plural=plural,
            singular=singular or cls.__name__.lower(),
            namespaced=namespaced,
            cls=cls,
            short_names=short_names,
            categories=categories,
            subresources=subresources,
            verbs=verbs,
            columns=columns,
            field_selectors=dict(field_selectors or {}),
            name_format=name_format,
            storage_version=storage_version,
            storage_group=storage_group,
            deprecated_since=deprecated_since,
            returns_deleted=returns_deleted,
            aggregated=aggregated,
        )
        cls.API_VERSION = info.api_version
        cls.KIND = info.kind
        cls.kind_info = info
        SCHEME.register(info)
        return cls

    return register
