"""core/v1 namespaces and what lives in them besides workloads: Namespace, ConfigMap, Secret,
ServiceAccount, Event, ResourceQuota and LimitRange; and ComponentStatus, the health of the
control plane as the API server probes it (read-only, never stored; deprecated since 1.19 but
served, as upstream serves it).

Binary values (``ConfigMap.binaryData``, ``Secret.data``) travel as base64 text in JSON and are
declared as that text; validation decodes them to check them and to measure their size.
``Secret.stringData`` is write-only sugar upstream merges into ``data`` when storing; it is
validated here as upstream validates the merged result, and left for the server to merge.

A new Namespace gets the ``kubernetes`` finalizer when it comes without a spec; upstream adds
it in its create strategy, not in defaulting, because the namespace controller removes it later
and must not see it come back.

The resource-name and quantity checks shared by quotas, limit ranges and node capacity live
here too.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import string
from collections.abc import Callable, Iterable
from typing import Annotated, Any, Self

import msgspec

from kube.api import names
from kube.api.errors import ROOT, ErrorList, Path
from kube.api.kinds.core_v1 import resources as resource_names
from kube.api.kinds.core_v1.pod import ResourceList
from kube.api.kinds.core_v1.volume import (
    ZERO,
    LocalObjectReference,
    ObjectReference,
    parse_quantity,
)
from kube.api.meta_v1 import Resource
from kube.api.printing import AGE_COLUMN, NAME_COLUMN, Column, age
from kube.api.quantity import Quantity
from kube.api.scheme import STANDARD_VERBS, kind
from kube.api.struct import (
    DNS1123_LABEL,
    MicroTime,
    Struct,
    Time,
    atomic,
    meta,
    parse_micro_time,
)

MAX_DATA_SIZE = 1024 * 1024
REDACTED = "<secret contents redacted>"

# Resource quantities (quotas, limit ranges, node capacity).


def validate_resource_quantity(resource: str, value: Any, path: Path, errors: ErrorList) -> None:
    """An amount of a resource: never negative, and whole for countable resources."""
    amount = parse_quantity(value)
    if amount is None:
        return  # not a quantity: the field's format check reports it
    if amount < ZERO:
        errors.invalid(path, str(amount), "must be greater than or equal to 0")
    if (
        resource in resource_names.INTEGER_RESOURCES or resource_names.is_extended(resource)
    ) and amount.milli_value() % 1000:
        errors.invalid(path, str(amount), "must be an integer")


# Keyed data (ConfigMap, Secret).


def _decode_base64(value: str) -> bytes | None:
    try:
        return base64.b64decode(value.replace("\r", "").replace("\n", ""), validate=True)
    except (binascii.Error, ValueError):
        return None


def _base64_problem(value: str) -> str:
    """Go's message for text that is not standard base64 (the offset of the first bad byte)."""
    text = value.replace("\r", "").replace("\n", "")
    alphabet = frozenset(string.ascii_letters + string.digits + "+/")
    body = text.rstrip("=")
    offset = next((i for i, c in enumerate(body) if c not in alphabet), len(body))
    return f"illegal base64 data at input byte {offset}"


def _validate_keys(keys: Iterable[str], path: Path, errors: ErrorList) -> None:
    for key in keys:
        for problem in names.is_config_map_key(key):
            errors.invalid(path.key(key), key, problem)


def _validate_base64(
    data: dict[str, str] | None, path: Path, errors: ErrorList, *, shown: str | None
) -> None:
    """Every value is base64 text; ``shown`` replaces the value in messages (None shows it)."""
    for key, value in (data or {}).items():
        if _decode_base64(value) is None:
            errors.invalid(path.key(key), value if shown is None else shown, _base64_problem(value))


def _validate_immutable_data(
    new: Any, old: Any, fields: tuple[tuple[str, str], ...], errors: ErrorList
) -> None:
    """Once ``immutable`` is true neither it nor the data fields may change."""
    if not old.immutable:
        return
    detail = "field is immutable when `immutable` is set"
    if not new.immutable:
        errors.forbidden(ROOT.child("immutable"), detail)
    for attr, name in fields:
        if (getattr(new, attr) or {}) != (getattr(old, attr) or {}):
            errors.forbidden(ROOT.child(name), detail)


@kind(
    group="",
    version="v1",
    plural="configmaps",
    short_names=("cm",),
    columns=(
        NAME_COLUMN,
        Column("Data", lambda o, now: len(o.data or {}) + len(o.binary_data or {})),
        AGE_COLUMN,
    ),
)
class ConfigMap(Resource):
    """Configuration as key-value pairs, for pods to consume as files or variables."""

    immutable: Annotated[
        bool | None, meta(doc="Whether data and binaryData are frozen for good.", proto=4)
    ] = None
    data: Annotated[dict[str, str] | None, meta(doc="UTF-8 values by key.", proto=2)] = None
    binary_data: Annotated[
        dict[str, str] | None,
        meta(doc="Binary values by key, base64-encoded in JSON.", proto=3, base64=True),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        data, binary = self.data or {}, self.binary_data or {}
        _validate_keys(data, path.child("data"), errors)
        for key in data:
            if key in binary:
                errors.invalid(
                    path.child("data").key(key), key, "duplicate of key present in binaryData"
                )
        _validate_keys(binary, path.child("binaryData"), errors)
        _validate_base64(binary, path.child("binaryData"), errors, shown=None)
        size = sum(len(v.encode()) for v in data.values())
        size += sum(len(_decode_base64(v) or b"") for v in binary.values())
        if size > MAX_DATA_SIZE:
            errors.too_long(path, MAX_DATA_SIZE)

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        _validate_immutable_data(
            self, old, (("data", "data"), ("binary_data", "binaryData")), errors
        )


SECRET_TYPES_REQUIRED_KEYS = {
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
    "kubernetes.io/dockercfg": (".dockercfg",),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
}
"""Keys a Secret of these types must have in its data."""
SERVICE_ACCOUNT_NAME_ANNOTATION = "kubernetes.io/service-account.name"


def _json_object_problem(content: bytes) -> str | None:
    """Why a docker config is not a JSON object, or None when it is one."""
    try:
        parsed = json.loads(content)
    except ValueError as error:
        return str(error)
    if parsed is None or isinstance(parsed, dict):
        return None  # JSON null decodes to an empty map in Go
    json_type = (
        "bool"
        if isinstance(parsed, bool)
        else "number"
        if isinstance(parsed, int | float)
        else "string"
        if isinstance(parsed, str)
        else "array"
    )
    return f"json: cannot unmarshal {json_type} into Go value of type map[string]interface {{}}"


@kind(
    group="",
    version="v1",
    plural="secrets",
    columns=(
        NAME_COLUMN,
        Column("Type", lambda o, now: o.type or ""),
        Column("Data", lambda o, now: len((o.data or {}).keys() | (o.string_data or {}).keys())),
        AGE_COLUMN,
    ),
    field_selectors={"type": lambda o: o.type},
)
class Secret(Resource):
    """Sensitive key-value data (passwords, tokens, keys), base64-encoded in ``data``."""

    immutable: Annotated[bool | None, meta(doc="Whether data is frozen for good.", proto=5)] = None
    data: Annotated[
        dict[str, str] | None,
        meta(doc="Secret values by key, base64-encoded.", proto=2, base64=True),
    ] = None
    string_data: Annotated[
        dict[str, str] | None,
        meta(doc="Write-only plain-text values, merged into data when stored.", proto=4),
    ] = None
    type: Annotated[
        str | None,
        meta(
            immutable=True,
            doc="What the secret holds; decides which keys it needs.",
            proto=3,
            omitempty=True,
        ),
    ] = None

    def set_defaults(self) -> None:
        if not self.type:
            self.type = "Opaque"

    def decoded_data(self) -> dict[str, bytes]:
        """The secret's data as stored: ``data`` decoded, overridden by ``stringData``
        (values that are not base64 are left out)."""
        decoded = {k: _decode_base64(v) for k, v in (self.data or {}).items()}
        merged = {k: v for k, v in decoded.items() if v is not None}
        merged.update((k, v.encode()) for k, v in (self.string_data or {}).items())
        return merged

    def validate(self, path: Path, errors: ErrorList) -> None:
        data_path = path.child("data")
        _validate_keys(
            (self.data or {}).keys() | (self.string_data or {}).keys(), data_path, errors
        )
        _validate_base64(self.data, data_path, errors, shown=REDACTED)
        data = self.decoded_data()
        if sum(len(v) for v in data.values()) > MAX_DATA_SIZE:
            errors.too_long(data_path, MAX_DATA_SIZE)
        if self.type == "kubernetes.io/service-account-token":
            annotations = self.metadata.annotations or {}
            if not annotations.get(SERVICE_ACCOUNT_NAME_ANNOTATION):
                errors.required(
                    path.child("metadata").child("annotations").key(SERVICE_ACCOUNT_NAME_ANNOTATION)
                )
        elif self.type == "kubernetes.io/basic-auth":
            if "username" not in data and "password" not in data:
                errors.required(data_path.key("username"))
                errors.required(data_path.key("password"))
        elif self.type == "kubernetes.io/ssh-auth" and not data.get("ssh-privatekey"):
            errors.required(data_path.key("ssh-privatekey"))
        for key in SECRET_TYPES_REQUIRED_KEYS.get(self.type or "", ()):
            if key not in data:
                errors.required(data_path.key(key))
            elif key.startswith(".docker"):
                problem = _json_object_problem(data[key])
                if problem is not None:
                    errors.invalid(data_path.key(key), REDACTED, problem)

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        _validate_immutable_data(self, old, (("data", "data"),), errors)


@kind(
    group="",
    version="v1",
    plural="serviceaccounts",
    short_names=("sa",),
    subresources=("token",),
    columns=(NAME_COLUMN, Column("Secrets", lambda o, now: len(o.secrets or ())), AGE_COLUMN),
)
class ServiceAccount(Resource):
    """An identity for processes in pods, with the secrets its tokens may come from."""

    secrets: Annotated[
        list[ObjectReference] | None,
        meta(
            merge_key="name", doc="Secrets pods of this account may use (legacy tokens).", proto=2
        ),
    ] = None
    image_pull_secrets: Annotated[
        list[LocalObjectReference] | None,
        atomic(doc="Secrets used to pull images of pods running as this account.", proto=3),
    ] = None
    automount_service_account_token: Annotated[
        bool | None, meta(doc="Whether pods get an API token mounted by default.", proto=4)
    ] = None


# Namespace.

KUBERNETES_FINALIZER = "kubernetes"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
_STANDARD_FINALIZERS = frozenset({KUBERNETES_FINALIZER, "orphan", "foregroundDeletion"})


class NamespaceSpec(Struct):
    """What must happen before a deleted namespace goes away."""

    finalizers: Annotated[list[str] | None, atomic(proto=1)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        # Upstream reports every finalizer at ``spec.finalizers``, without an index.
        finalizers_path = path.child("finalizers")
        for finalizer in self.finalizers or ():
            errors.extend_checked(finalizers_path, finalizer, names.is_qualified_name(finalizer))
            if "/" not in finalizer and finalizer not in _STANDARD_FINALIZERS:
                errors.invalid(
                    finalizers_path,
                    finalizer,
                    "name is neither a standard finalizer name nor is it fully qualified",
                )


class NamespaceCondition(Struct):
    """One aspect of a namespace's state, mostly about its deletion."""

    type: Annotated[str | None, meta(proto=1)] = None
    status: Annotated[str | None, meta(proto=2)] = None
    last_transition_time: Annotated[Time | None, meta(proto=4)] = None
    reason: Annotated[str | None, meta(proto=5, omitempty=True)] = None
    message: Annotated[str | None, meta(proto=6, omitempty=True)] = None


class NamespaceStatus(Struct):
    """Whether the namespace is active or being deleted."""

    phase: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    conditions: Annotated[list[NamespaceCondition] | None, meta(merge_key="type", proto=2)] = None

    def set_defaults(self) -> None:
        if not self.phase:
            self.phase = "Active"


@kind(
    group="",
    version="v1",
    plural="namespaces",
    namespaced=False,
    short_names=("ns",),
    verbs=tuple(v for v in STANDARD_VERBS if v != "deletecollection"),
    subresources=("status", "finalize"),
    name_format=DNS1123_LABEL,
    columns=(
        NAME_COLUMN,
        Column(
            "Status",
            lambda o, now: (o.status.phase or "") if o.status else "",
            description="The status of the namespace",
        ),
        AGE_COLUMN,
    ),
    field_selectors={"status.phase": lambda o: o.status.phase if o.status else None},
)
class Namespace(Resource):
    """A scope for names, and the unit of access control and quotas."""

    spec: Annotated[NamespaceSpec | None, meta(doc="Finalizers to run on deletion.", proto=2)] = (
        None
    )
    status: Annotated[NamespaceStatus | None, meta(doc="Active or Terminating.", proto=3)] = None

    def set_defaults(self) -> None:
        if self.metadata.name:
            self.metadata.labels = {
                **(self.metadata.labels or {}),
                NAMESPACE_NAME_LABEL: self.metadata.name,
            }
        if self.status is None:
            self.status = NamespaceStatus()


# Event.

EVENT_TYPES = ("Normal", "Warning")
NOTE_LIMIT = 1024


class EventSource(Struct):
    """The component (and host) that reported an event."""

    component: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    host: Annotated[str | None, meta(proto=2, omitempty=True)] = None


class EventSeries(Struct):
    """A run of the same event, counted instead of repeated."""

    count: Annotated[int | None, meta(proto=1, omitempty=True)] = None
    last_observed_time: Annotated[MicroTime | None, meta(proto=2, omitempty=True)] = None


def _event_source(event: Event) -> str:
    source = event.source or EventSource()
    component = source.component or event.reporting_component or ""
    instance = source.host or event.reporting_instance or ""
    return f"{component}, {instance}" if instance else component


def _moment(value: str | None) -> datetime.datetime | None:
    """A MicroTime as a moment (None when absent or unreadable)."""
    try:
        return parse_micro_time(value) if value else None
    except ValueError:
        return None


def _first_seen(event: Event, now: Any) -> str:
    return age(event.first_timestamp or _moment(event.event_time), now)


def _last_seen(event: Event, now: Any) -> str:
    if event.series is not None:
        return age(_moment(event.series.last_observed_time), now)
    if event.last_timestamp is None:
        return _first_seen(event, now)
    return age(event.last_timestamp, now)


def _event_count(event: Event) -> int:
    if event.series is not None:
        return event.series.count or 0
    return event.count or 1


def _event_object(event: Event) -> str:
    involved = event.involved_object or ObjectReference()
    kind_name = (involved.kind or "").lower()
    return f"{kind_name}/{involved.name}" if involved.name else kind_name


def _involved(field: str) -> Callable[[Any], str | None]:
    """A field selector on ``involvedObject.<field>``."""
    return lambda o: getattr(o.involved_object, field) if o.involved_object else None


@kind(
    group="",
    version="v1",
    plural="events",
    short_names=("ev",),
    columns=(
        Column("Last Seen", _last_seen),
        Column("Type", lambda o, now: o.type or ""),
        Column("Reason", lambda o, now: o.reason or ""),
        Column("Object", lambda o, now: _event_object(o)),
        Column(
            "Subobject",
            lambda o, now: o.involved_object.field_path or "" if o.involved_object else "",
            priority=1,
        ),
        Column("Source", lambda o, now: _event_source(o), priority=1),
        Column("Message", lambda o, now: (o.message or "").strip()),
        Column("First Seen", _first_seen, priority=1),
        Column("Count", lambda o, now: _event_count(o), priority=1),
        Column("Name", lambda o, now: o.metadata.name, format="name", priority=1),
    ),
    field_selectors={
        "involvedObject.kind": _involved("kind"),
        "involvedObject.namespace": _involved("namespace"),
        "involvedObject.name": _involved("name"),
        "involvedObject.uid": _involved("uid"),
        "involvedObject.apiVersion": _involved("api_version"),
        "involvedObject.resourceVersion": _involved("resource_version"),
        "involvedObject.fieldPath": _involved("field_path"),
        "reason": lambda o: o.reason,
        "reportingComponent": lambda o: o.reporting_component,
        "source": lambda o: (o.source.component if o.source else None) or o.reporting_component,
        "type": lambda o: o.type,
    },
)
class Event(Resource):
    """A report of something that happened to an object (core/v1; see also events.k8s.io)."""

    involved_object: Annotated[
        ObjectReference | None, meta(doc="The object the event is about.", proto=2)
    ] = None
    reason: Annotated[
        str | None, meta(doc="Why it happened, in UpperCamelCase.", proto=3, omitempty=True)
    ] = None
    message: Annotated[
        str | None, meta(doc="What happened, for humans.", proto=4, omitempty=True)
    ] = None
    source: Annotated[EventSource | None, meta(proto=5)] = None
    first_timestamp: Annotated[Time | None, meta(proto=6, omitempty=True)] = None
    last_timestamp: Annotated[Time | None, meta(proto=7, omitempty=True)] = None
    count: Annotated[int | None, meta(proto=8, omitempty=True)] = None
    type: Annotated[str | None, meta(doc="Normal or Warning.", proto=9, omitempty=True)] = None
    event_time: Annotated[MicroTime | None, meta(proto=10, omitempty=True)] = None
    series: Annotated[EventSeries | None, meta(proto=11)] = None
    action: Annotated[str | None, meta(proto=12, omitempty=True)] = None
    related: Annotated[ObjectReference | None, meta(proto=13)] = None
    reporting_component: Annotated[str | None, meta(proto=14)] = None
    reporting_instance: Annotated[str | None, meta(proto=15)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        validate_event(self, "reportingComponent", path, errors)


REPORTING_INSTANCE_LIMIT = ACTION_LIMIT = REASON_LIMIT = 128


def validate_event(event: Event, controller_field: str, path: Path, errors: ErrorList) -> None:
    """Upstream's checks of every event, whichever group it is written through (its
    ``legacyValidateEvent``): an event with an eventTime names its reporter and action.
    Paths are core's field names, as upstream's (which validates the internal object), except
    the reporting controller, named as the group the request came through calls it."""
    namespace = event.metadata.namespace or ""
    involved_namespace = (event.involved_object or ObjectReference()).namespace or ""
    if event.event_time is None:
        # An old-style event: an event about a cluster-scoped object lives in "default"
        # (or nowhere); any other must live in the namespace of its object.
        allowed = ("", "default") if not involved_namespace else (involved_namespace,)
    else:
        allowed = ("default", "kube-system") if not involved_namespace else (namespace,)
    if namespace not in allowed:
        errors.invalid(
            path.child("involvedObject").child("namespace"),
            involved_namespace,
            "does not match event.namespace",
        )
    if event.event_time is None:
        return
    controller_path = path.child(controller_field)
    if not event.reporting_component:
        errors.required(controller_path)
    for problem in names.is_qualified_name(event.reporting_component or ""):
        errors.invalid(controller_path, event.reporting_component or "", problem)
    for name, value, limit in (
        ("reportingInstance", event.reporting_instance, REPORTING_INSTANCE_LIMIT),
        ("action", event.action, ACTION_LIMIT),
        ("reason", event.reason, REASON_LIMIT),
    ):
        if not value:
            errors.required(path.child(name))
        elif len(value) > limit:
            errors.invalid(path.child(name), "", f"can have at most {limit} characters")
    if len(event.message or "") > NOTE_LIMIT:
        errors.invalid(path.child("message"), "", f"can have at most {NOTE_LIMIT} characters")


# ComponentStatus.

COMPONENT_HEALTHY = "Healthy"


class ComponentCondition(Struct):
    """One probe of a component: whether it is healthy, what it said, what went wrong."""

    type: Annotated[str | None, meta(required=True, doc="Type of condition: Healthy.", proto=1)] = (
        None
    )
    status: Annotated[str | None, meta(required=True, doc="True, False or Unknown.", proto=2)] = (
        None
    )
    message: Annotated[str | None, meta(doc="What the component answered.", proto=3)] = None
    error: Annotated[str | None, meta(doc="Why the probe failed.", proto=4)] = None


def _health(obj: ComponentStatus) -> tuple[str, str, str]:
    """Upstream's printComponentStatus: STATUS, MESSAGE, ERROR of the Healthy condition."""
    for condition in obj.conditions or ():
        if condition.type == COMPONENT_HEALTHY:
            status = "Healthy" if condition.status == "True" else "Unhealthy"
            return status, condition.message or "", condition.error or ""
    return "Unknown", "", ""


@kind(
    group="",
    version="v1",
    plural="componentstatuses",
    namespaced=False,
    short_names=("cs",),
    verbs=("get", "list"),
    columns=(
        NAME_COLUMN,
        Column("Status", lambda o, now: _health(o)[0]),
        Column("Message", lambda o, now: _health(o)[1]),
        Column("Error", lambda o, now: _health(o)[2]),
    ),
    deprecated_since="1.19",
)
class ComponentStatus(Resource):
    """The health of one control-plane component, probed when read."""

    conditions: Annotated[
        list[ComponentCondition] | None,
        meta(merge_key="type", doc="The component's conditions.", proto=2),
    ] = None


# ResourceQuota.

QUOTA_SCOPES = (
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
    "VolumeAttributesClass",
)
_CONFLICTING_SCOPES = (
    frozenset({"BestEffort", "NotBestEffort"}),
    frozenset({"Terminating", "NotTerminating"}),
)
_EXISTS_ONLY_SCOPES = frozenset(
    {"BestEffort", "NotBestEffort", "Terminating", "NotTerminating", "CrossNamespacePodAffinity"}
)
_EXISTS_ONLY_MESSAGE = (
    "must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, "
    "ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, "
    "ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity"
)
_POD_QUOTA_RESOURCES = frozenset(
    {"pods", "cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu", "requests.memory"}
)


def _scope_fits_resource(scope: str | None, resource: str) -> bool:
    """Whether a quota scope can limit a standard resource."""
    if scope == "BestEffort":
        return resource == "pods"
    if scope == "VolumeAttributesClass":
        return resource in ("persistentvolumeclaims", "requests.storage")
    if scope in QUOTA_SCOPES:
        return resource in _POD_QUOTA_RESOURCES
    return True


def _standard_quota_resources(hard: ResourceList | None) -> list[str]:
    return sorted(
        r
        for r in hard or {}
        if r in resource_names.STANDARD_QUOTA_RESOURCES or resource_names.is_quota_hugepages(r)
    )


def _validate_quota_resources(
    resources: ResourceList | None, path: Path, errors: ErrorList
) -> None:
    for resource, value in (resources or {}).items():
        resource_names.validate_quota_resource_name(resource, path.key(resource), errors)
        validate_resource_quantity(resource, value, path.key(resource), errors)


class ScopedResourceSelectorRequirement(Struct):
    """A scope and the values it must (not) take: ``PriorityClass In (high)``."""

    scope_name: Annotated[str | None, meta(proto=1)] = None
    operator: Annotated[str | None, meta(proto=2)] = None
    values: Annotated[list[str] | None, atomic(proto=3)] = None


class ScopeSelector(Struct):
    """Scope requirements that must all hold for a quota to apply."""

    match_expressions: Annotated[
        list[ScopedResourceSelectorRequirement] | None, atomic(proto=1)
    ] = None


class ResourceQuotaSpec(Struct):
    """The limits a quota sets and the objects it applies to."""

    hard: Annotated[ResourceList | None, meta(proto=1)] = None
    scopes: Annotated[list[str] | None, atomic(proto=2)] = None
    scope_selector: Annotated[ScopeSelector | None, meta(proto=3)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_quota_resources(self.hard, path.child("hard"), errors)
        limited = _standard_quota_resources(self.hard)
        scopes_path = path.child("scopes")
        for scope in self.scopes or ():
            if scope not in QUOTA_SCOPES:
                errors.invalid(scopes_path, self.scopes, "unsupported scope")
            for resource in limited:
                if not _scope_fits_resource(scope, resource):
                    errors.invalid(
                        scopes_path, self.scopes, "unsupported scope applied to resource"
                    )
        if any(pair <= set(self.scopes or ()) for pair in _CONFLICTING_SCOPES):
            errors.invalid(scopes_path, self.scopes, "conflicting scopes")
        if self.scope_selector is not None:
            self._validate_scope_selector(self.scope_selector, limited, path, errors)

    def _validate_scope_selector(
        self, selector: ScopeSelector, limited: list[str], path: Path, errors: ErrorList
    ) -> None:
        # Upstream reports every requirement at ``matchExpressions``, without an index.
        expressions_path = path.child("scopeSelector").child("matchExpressions")
        scopes: set[str | None] = set()
        for requirement in selector.match_expressions or ():
            scope = requirement.scope_name
            if scope not in QUOTA_SCOPES:
                errors.invalid(expressions_path.child("scopeName"), scope, "unsupported scope")
            for resource in limited:
                if not _scope_fits_resource(scope, resource):
                    errors.invalid(
                        expressions_path,
                        msgspec.to_builtins(selector),
                        "unsupported scope applied to resource",
                    )
            operator_path = expressions_path.child("operator")
            if scope in _EXISTS_ONLY_SCOPES and requirement.operator != "Exists":
                errors.invalid(
                    operator_path,
                    requirement.operator,
                    _EXISTS_ONLY_MESSAGE,
                )
            if requirement.operator in ("In", "NotIn"):
                if not requirement.values:
                    errors.required(
                        expressions_path.child("values"),
                        "must be at least one value when `operator` is 'In' or 'NotIn' for "
                        "scope selector",
                    )
            elif requirement.operator in ("Exists", "DoesNotExist"):
                if requirement.values:
                    errors.invalid(
                        expressions_path.child("values"),
                        requirement.values,
                        "must be no value when `operator` is 'Exist' or 'DoesNotExist' for "
                        "scope selector",
                    )
            else:
                errors.invalid(operator_path, requirement.operator, "not a valid selector operator")
            scopes.add(scope)
        if any(pair <= scopes for pair in _CONFLICTING_SCOPES):
            errors.invalid(expressions_path, self.scopes, "conflicting scopes")


class ResourceQuotaStatus(Struct):
    """The limits in force and what the namespace uses of them."""

    hard: Annotated[ResourceList | None, meta(proto=1)] = None
    used: Annotated[ResourceList | None, meta(proto=2)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_quota_resources(self.hard, path.child("hard"), errors)
        _validate_quota_resources(self.used, path.child("used"), errors)


def _quota_cells(quota: ResourceQuota) -> tuple[str, str]:
    """The REQUEST and LIMIT cells: ``resource: used/hard`` for each limited resource, those
    named ``limits.*`` in the second."""
    status = quota.status or ResourceQuotaStatus()
    hard, used = status.hard or {}, status.used or {}
    requests: list[str] = []
    limits: list[str] = []
    for resource in sorted(hard):
        text = f"{resource}: {_quantity_text(used.get(resource))}/{_quantity_text(hard[resource])}"
        (limits if resource.startswith("limits.") else requests).append(text)
    return ", ".join(requests), ", ".join(limits)


def _quantity_text(value: Any) -> str:
    amount = parse_quantity(value)
    return str(amount if amount is not None else ZERO)


@kind(
    group="",
    version="v1",
    plural="resourcequotas",
    short_names=("quota",),
    subresources=("status",),
    columns=(
        NAME_COLUMN,
        Column(
            "Request",
            lambda o, now: _quota_cells(o)[0],
            description="Request represents a minimum amount of cpu/memory that a container "
            "may consume.",
        ),
        Column(
            "Limit",
            lambda o, now: _quota_cells(o)[1],
            description="Limits control the maximum amount of cpu/memory that a container may "
            "use independent of contention on the node.",
        ),
        AGE_COLUMN,
    ),
)
class ResourceQuota(Resource):
    """Limits on what a namespace may consume: compute resources and object counts."""

    spec: Annotated[
        ResourceQuotaSpec | None, meta(doc="The limits and the objects they apply to.", proto=2)
    ] = None
    status: Annotated[
        ResourceQuotaStatus | None, meta(doc="The limits in force and current usage.", proto=3)
    ] = None

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        scopes = (self.spec.scopes if self.spec else None) or []
        old_scopes = (old.spec.scopes if old.spec else None) or []
        if set(scopes) != set(old_scopes):
            errors.immutable(ROOT.child("spec").child("scopes"), scopes)


# LimitRange.

LIMIT_TYPES = ("Pod", "Container", "PersistentVolumeClaim")


class LimitRangeItem(Struct):
    """Bounds and defaults for the resources of one kind of object."""

    type: Annotated[str | None, meta(proto=1)] = None
    max: Annotated[ResourceList | None, meta(proto=2)] = None
    min: Annotated[ResourceList | None, meta(proto=3)] = None
    default: Annotated[ResourceList | None, meta(proto=4)] = None
    default_request: Annotated[ResourceList | None, meta(proto=5)] = None
    max_limit_request_ratio: Annotated[ResourceList | None, meta(proto=6)] = None

    def set_defaults(self) -> None:
        if self.type != "Container":
            return
        default = {**(self.max or {}), **(self.default or {})}
        request = {**(self.min or {}), **default, **(self.default_request or {})}
        self.default = default or self.default
        self.default_request = request or self.default_request

    def validate(self, path: Path, errors: ErrorList) -> None:
        self._validate_type(path.child("type"), errors)
        check_name = (
            resource_names.validate_container_resource_name
            if self.type in ("Pod", "Container")
            else resource_names.validate_resource_name
        )
        bounds: dict[str, dict[str, Quantity]] = {}
        fields = [("max", self.max), ("min", self.min)]
        if self.type == "Pod":
            for name, values in (
                ("default", self.default),
                ("defaultRequest", self.default_request),
            ):
                if values:
                    errors.forbidden(path.child(name), "may not be specified when `type` is 'Pod'")
        else:
            fields += [("default", self.default), ("defaultRequest", self.default_request)]
        if (
            self.type == "PersistentVolumeClaim"
            and "storage" not in (self.min or {})
            and ("storage" not in (self.max or {}))
        ):
            errors.required(
                path.child("limits"),
                "either minimum or maximum storage value is required, but neither was provided",
            )
        fields.append(("maxLimitRequestRatio", self.max_limit_request_ratio))
        for name, values in fields:
            parsed = bounds.setdefault(name, {})
            for resource, value in (values or {}).items():
                check_name(resource, path.child(name).key(resource), errors)
                amount = parse_quantity(value)
                if amount is not None:
                    parsed[resource] = amount
        for resource in sorted({r for values in bounds.values() for r in values}):
            self._validate_order(resource, bounds, path, errors)

    def _validate_type(self, path: Path, errors: ErrorList) -> None:
        value = self.type or ""
        problems = names.is_qualified_name(value)
        for problem in problems:
            errors.invalid(path, value, problem)
        if not problems and "/" not in value and value not in LIMIT_TYPES:
            errors.invalid(path, value, "must be a standard limit type or fully qualified")

    @staticmethod
    def _validate_order(
        resource: str, bounds: dict[str, dict[str, Quantity]], path: Path, errors: ErrorList
    ) -> None:
        """min <= defaultRequest <= default <= max, and a sensible limit/request ratio."""
        low, high = bounds["min"].get(resource), bounds["max"].get(resource)
        default = bounds.get("default", {}).get(resource)
        request = bounds.get("defaultRequest", {}).get(resource)
        ratio = bounds["maxLimitRequestRatio"].get(resource)

        def at(name: str) -> Path:
            return path.child(name).key(resource)

        if low is not None and high is not None and low > high:
            errors.invalid(at("min"), str(low), f"min value {low} is greater than max value {high}")
        if request is not None and low is not None and low > request:
            errors.invalid(
                at("defaultRequest"),
                str(request),
                f"min value {low} is greater than default request value {request}",
            )
        if request is not None and high is not None and request > high:
            errors.invalid(
                at("defaultRequest"),
                str(request),
                f"default request value {request} is greater than max value {high}",
            )
        if request is not None and default is not None and request > default:
            errors.invalid(
                at("defaultRequest"),
                str(request),
                f"default request value {request} is greater than default limit value {default}",
            )
        if default is not None and low is not None and low > default:
            errors.invalid(
                at("default"), str(low), f"min value {low} is greater than default value {default}"
            )
        if default is not None and high is not None and default > high:
            errors.invalid(
                at("default"),
                str(high),
                f"default value {default} is greater than max value {high}",
            )
        if ratio is not None and ratio < Quantity(1):
            errors.invalid(at("maxLimitRequestRatio"), str(ratio), f"ratio {ratio} is less than 1")
        if ratio is not None and low is not None and high is not None and low > ZERO:
            limit = high.as_fraction() / low.as_fraction()
            if ratio.as_fraction() > limit:
                errors.invalid(
                    at("maxLimitRequestRatio"),
                    str(ratio),
                    f"ratio {ratio} is greater than max/min = {float(limit):f}",
                )
        if (
            not resource_names.overcommit_allowed(resource)
            and default is not None
            and request is not None
            and default != request
        ):
            errors.invalid(
                at("defaultRequest"),
                str(request),
                f"default value {default} must equal to defaultRequest value {request} in "
                f"{resource}",
            )


class LimitRangeSpec(Struct):
    """The limit items of a LimitRange."""

    limits: Annotated[list[LimitRangeItem] | None, atomic(proto=1)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        seen: set[str | None] = set()
        for i, item in enumerate(self.limits or ()):
            if item.type in seen:
                errors.duplicate(path.child("limits").index(i).child("type"), item.type)
            seen.add(item.type)


@kind(group="", version="v1", plural="limitranges", short_names=("limits",))
class LimitRange(Resource):
    """Per-object bounds and defaults for resources in a namespace."""

    spec: Annotated[
        LimitRangeSpec | None, meta(doc="Bounds and defaults by kind of object.", proto=2)
    ] = None
