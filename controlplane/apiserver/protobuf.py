"""Kubernetes protobuf request bodies, decoded into the JSON-shaped dicts the server works on.

kubectl's generator commands (``create namespace|configmap|secret|deployment|service|job|
cronjob|role|clusterrole|rolebinding|clusterrolebinding|quota|priorityclass|
poddisruptionbudget|ingress|serviceaccount|token``, ``auth can-i``, ``auth whoami``) and
``debug`` (the pod of ``--copy-to`` and of ``node/NAME``) build
typed objects and POST them with ``Content-Type: application/vnd.kubernetes.protobuf``.  Such a
body is an envelope::

    b"k8s\\x00"  +  runtime.Unknown {
        1: typeMeta  TypeMeta {1: apiVersion, 2: kind}
        2: raw       bytes    -- the object, in the k8s.io/api generated.proto field numbers
        3: contentEncoding    -- always empty from kubectl
        4: contentType        -- likewise
    }

``decode_body`` opens the envelope, looks the kind up in ``KINDS`` and turns the object into
exactly what the client would have sent as JSON: JSON field names, int64 as int, ``bytes`` as
base64 text, ``Time`` as RFC 3339 (``2024-01-01T00:00:00Z``), ``Quantity`` as its string,
``IntOrString`` as int or str, map entries (key=1, value=2) as dicts, repeated fields as lists,
inline structs (``VolumeSource`` in ``Volume``, ``ProbeHandler`` in ``Probe``, ...) merged into
their parent.  The rest of the server then never knows which encoding arrived.

Absent and zero.  Go's protobuf encoder always writes value (non-pointer) fields, zeros
included, and writes pointer fields only when set; Go's JSON encoder drops zero values of
``omitempty`` value fields.  So a table row is ``number: (json name, type, presence)``, presence
being ``"list"`` for a repeated field and, for a singular one, ``"omit"`` (a Go value field with
``omitempty``: dropped when it decodes to ""/0/false, or to a null Time) or ``"keep"`` (pointer
fields, fields without ``omitempty``, messages: kept whatever the value).  Fields not on the
wire are left out.  A zero ``metav1.Time`` travels as an empty message and decodes to
``None`` (JSON null) as in Go; ``metadata.creationTimestamp`` is ``omitzero`` since 1.34, so a
zero one is dropped, as kubectl's own JSON does.  An empty repeated field is indistinguishable
from an absent one on the wire and is left out (Go would print ``null`` for the few without
``omitempty``, e.g. ``rules`` of an aggregated ClusterRole; both mean an empty list).

Why hand-written tables and not generated classes: the wire format is five rules, the server
only ever decodes (never encodes) a closed set of kinds, and a table per message keeps the JSON
names and the omitempty facts, which generated protobuf classes do not carry, next to the field
numbers.  A field number missing from a table is an error naming message and number, never
silently dropped, so a newer kubectl sending a new field is noticed rather than lost.  The
numbers follow k8s.io/api and k8s.io/apimachinery release-1.36 generated.proto; the presence
marks follow the Go struct tags of the same release.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal

MAGIC: Final = b"k8s\x00"

Presence = Literal["omit", "keep", "list"]
Field = tuple[str, str, Presence]
"""One table row: JSON name ("" = inline into the parent), type, presence."""

SCALARS: Final = frozenset({"string", "int32", "int64", "bool", "bytes", "double"})
SPECIALS: Final = frozenset({"Time", "Quantity", "IntOrString", "FieldsV1", "ExtraValue"})
"""Messages whose JSON form is not an object: decoded by code, not by a table."""

_VARINT, _FIXED64, _LENGTH, _GROUP_START, _GROUP_END, _FIXED32 = range(6)
_PACKABLE: Final = {"int32": _VARINT, "int64": _VARINT, "bool": _VARINT, "double": _FIXED64}
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


class ProtobufError(ValueError):
    """The body is not a Kubernetes protobuf object this server can read."""


# --- the wire format ---------------------------------------------------------------------------


def _varint(data: bytes, pos: int, where: str) -> tuple[int, int]:
    """The unsigned varint at ``pos`` and the position after it."""
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError(f"{where}: truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift >= 70:
            raise ProtobufError(f"{where}: varint longer than 10 bytes")


def _fields(data: bytes, where: str) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) for each field: ints for varint/fixed, bytes else."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos, where)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtobufError(f"{where}: field number 0")
        value: int | bytes
        if wire == _VARINT:
            value, pos = _varint(data, pos, f"{where} field {number}")
        elif wire in (_FIXED64, _FIXED32):
            size = 8 if wire == _FIXED64 else 4
            if pos + size > len(data):
                raise ProtobufError(f"{where} field {number}: truncated {size * 8}-bit value")
            value = int.from_bytes(data[pos : pos + size], "little")
            pos += size
        elif wire == _LENGTH:
            length, pos = _varint(data, pos, f"{where} field {number}")
            if pos + length > len(data):
                raise ProtobufError(
                    f"{where} field {number}: length {length} runs past the end of the data"
                )
            value = data[pos : pos + length]
            pos += length
        elif wire in (_GROUP_START, _GROUP_END):
            raise ProtobufError(f"{where} field {number}: groups are not supported")
        else:
            raise ProtobufError(f"{where} field {number}: invalid wire type {wire}")
        yield number, wire, value


def _signed(value: int, bits: int) -> int:
    value &= (1 << 64) - 1
    if value >= 1 << 63:
        value -= 1 << 64
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise ProtobufError(f"value {value} out of range for int{bits}")
    return value


# --- values ------------------------------------------------------------------------------------


def _scalar(kind: str, wire: int, value: int | bytes, where: str) -> Any:
    expected = _LENGTH if kind in ("string", "bytes") else _PACKABLE[kind]
    if wire != expected:
        raise ProtobufError(f"{where}: wire type {wire} cannot carry {kind}")
    if isinstance(value, bytes):
        if kind == "bytes":
            return base64.b64encode(value).decode("ascii")
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ProtobufError(f"{where}: string is not UTF-8") from error
    if kind == "bool":
        return value != 0
    if kind == "double":
        return struct.unpack("<d", value.to_bytes(8, "little"))[0]
    try:
        return _signed(value, 32 if kind == "int32" else 64)
    except ProtobufError as error:
        raise ProtobufError(f"{where}: {error}") from None


def _packed(kind: str, data: bytes, where: str) -> list[Any]:
    """The elements of a packed repeated scalar field."""
    values: list[Any] = []
    pos = 0
    while pos < len(data):
        if kind == "double":
            if pos + 8 > len(data):
                raise ProtobufError(f"{where}: truncated packed double")
            values.append(
                _scalar(kind, _FIXED64, int.from_bytes(data[pos : pos + 8], "little"), where)
            )
            pos += 8
        else:
            number, pos = _varint(data, pos, where)
            values.append(_scalar(kind, _VARINT, number, where))
    return values


def _time(data: bytes, where: str) -> str | None:
    """metav1.Time: empty is Go's zero time (JSON null); nanos are ignored, as Go does."""
    if not data:
        return None
    seconds = 0
    for number, wire, value in _fields(data, where):
        if number == 1:
            seconds = _scalar("int64", wire, value, f"{where}.seconds")
        elif number == 2:
            _scalar("int32", wire, value, f"{where}.nanos")
        else:
            raise ProtobufError(f"{where}: unknown field number {number} in Time")
    try:
        moment = _EPOCH + timedelta(seconds=seconds)
    except OverflowError:
        raise ProtobufError(f"{where}: time {seconds}s is out of range") from None
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T"
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}Z"
    )


def _special(kind: str, data: bytes, where: str) -> Any:
    if kind == "Time":
        return _time(data, where)
    parts: dict[int, Any] = {}
    items: list[Any] = []
    for number, wire, value in _fields(data, where):
        if kind == "Quantity" and number == 1:
            parts[1] = _scalar("string", wire, value, where)
        elif kind == "IntOrString" and number in (1, 2, 3):
            parts[number] = _scalar(("int64", "int32", "string")[number - 1], wire, value, where)
        elif kind == "FieldsV1" and number == 1:
            if not isinstance(value, bytes) or wire != _LENGTH:
                raise ProtobufError(f"{where}: wire type {wire} cannot carry FieldsV1")
            parts[1] = value
        elif kind == "ExtraValue" and number == 1:
            items.append(_scalar("string", wire, value, where))
        else:
            raise ProtobufError(f"{where}: unknown field number {number} in {kind}")
    if kind == "Quantity":
        return parts.get(1, "0")
    if kind == "IntOrString":
        int_or_string = parts.get(1, 0)
        if int_or_string == 0:
            return parts.get(2, 0)
        if int_or_string == 1:
            return parts.get(3, "")
        raise ProtobufError(f"{where}: IntOrString type {int_or_string}")
    if kind == "ExtraValue":
        return items
    raw = parts.get(1, b"")
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError as error:
        raise ProtobufError(f"{where}: FieldsV1 is not JSON") from error


def _single(kind: str, wire: int, value: int | bytes, where: str) -> Any:
    """One value of a field of type ``kind``."""
    if kind in SCALARS:
        return _scalar(kind, wire, value, where)
    if wire != _LENGTH or not isinstance(value, bytes):
        raise ProtobufError(f"{where}: wire type {wire} cannot carry {kind}")
    if kind in SPECIALS:
        return _special(kind, value, where)
    return _message(kind, value)


def _map_entry(kind: str, data: bytes, where: str) -> tuple[str, Any]:
    """A map entry {1: key, 2: value}; a missing part is its type's zero value."""
    value_kind = kind[len("map<string,") : -1]
    key = ""
    found: tuple[int, int | bytes] | None = None
    for number, wire, value in _fields(data, where):
        if number == 1:
            key = _scalar("string", wire, value, f"{where} key")
        elif number == 2:
            found = (wire, value)
        else:
            raise ProtobufError(f"{where}: unknown field number {number} in a map entry")
    if found is None:
        found = (_PACKABLE.get(value_kind, _LENGTH), 0 if value_kind in _PACKABLE else b"")
    return key, _single(value_kind, found[0], found[1], f"{where}[{key!r}]")


def _message(name: str, data: bytes) -> dict[str, Any]:
    """A message as a JSON object, following ``MESSAGES[name]``."""
    table = MESSAGES[name]
    result: dict[str, Any] = {}
    singular_messages: dict[int, bytes] = {}
    for number, wire, value in _fields(data, name):
        field = table.get(number)
        if field is None:
            raise ProtobufError(f"{name}: unknown field number {number}")
        json_name, kind, presence = field
        where = f"{name}.{json_name or kind}"
        if kind.startswith("map<"):
            if not isinstance(value, bytes):
                raise ProtobufError(f"{where}: wire type {wire} cannot carry a map entry")
            key, item = _map_entry(kind, value, where)
            result.setdefault(json_name, {})[key] = item
        elif presence == "list":
            items = result.setdefault(json_name, [])
            if kind in _PACKABLE and wire == _LENGTH and isinstance(value, bytes):
                items.extend(_packed(kind, value, where))
            else:
                items.append(_single(kind, wire, value, where))
        elif kind in SCALARS:
            result[json_name] = _single(kind, wire, value, where)
        elif not isinstance(value, bytes):
            raise ProtobufError(f"{where}: wire type {wire} cannot carry {kind}")
        else:
            # Decoded once all its parts are in: a singular message seen twice is merged,
            # which is what decoding the concatenation of its parts does.
            singular_messages[number] = singular_messages.get(number, b"") + value
            if json_name:
                result.setdefault(json_name, None)  # keeps the wire order of the keys
    for number, raw in singular_messages.items():
        json_name, kind, _ = table[number]
        decoded = _single(kind, _LENGTH, raw, f"{name}.{json_name or kind}")
        if json_name:
            result[json_name] = decoded
        else:
            result.update(decoded)
    for json_name, _, presence in table.values():
        if presence == "omit" and json_name in result and not result[json_name]:
            del result[json_name]
    return result


# --- the envelope ------------------------------------------------------------------------------


def decode_body(data: bytes) -> dict[str, Any]:
    """The object in an ``application/vnd.kubernetes.protobuf`` body, as its JSON dict.

    Raises ``ProtobufError`` for a body without the magic, malformed wire data, an envelope
    with a content encoding, or a kind without a table here.
    """
    if not data.startswith(MAGIC):
        raise ProtobufError("not a Kubernetes protobuf body: it does not start with 'k8s\\x00'")
    type_meta, raw = b"", b""
    for number, wire, value in _fields(data[len(MAGIC) :], "Unknown"):
        if number not in (1, 2, 3, 4):
            raise ProtobufError(f"Unknown: unknown field number {number}")
        if wire != _LENGTH or not isinstance(value, bytes):
            raise ProtobufError(f"Unknown field {number}: wire type {wire}")
        if number == 1:
            type_meta += value
        elif number == 2:
            raw = value
        elif value:
            what = "contentEncoding" if number == 3 else "contentType"
            raise ProtobufError(f"Unknown.{what} {value!r} is not supported")
    api_version = kind = ""
    for number, wire, value in _fields(type_meta, "TypeMeta"):
        if number not in (1, 2):
            raise ProtobufError(f"TypeMeta: unknown field number {number}")
        text = _scalar("string", wire, value, "TypeMeta")
        if number == 1:
            api_version = text
        else:
            kind = text
    name = KINDS.get((api_version, kind))
    if name is None:
        raise ProtobufError(f"no protobuf schema for kind {kind!r} in apiVersion {api_version!r}")
    return {"kind": kind, "apiVersion": api_version, **_message(name, raw)}


# --- the kinds ---------------------------------------------------------------------------------

KINDS: Final[dict[tuple[str, str], str]] = {
    ("v1", "Namespace"): "Namespace",
    ("v1", "ConfigMap"): "ConfigMap",
    ("v1", "Secret"): "Secret",
    ("v1", "ServiceAccount"): "ServiceAccount",
    ("v1", "Service"): "Service",
    ("v1", "ResourceQuota"): "ResourceQuota",
    ("v1", "Pod"): "Pod",
    ("apps/v1", "Deployment"): "Deployment",
    ("batch/v1", "Job"): "Job",
    ("batch/v1", "CronJob"): "CronJob",
    ("rbac.authorization.k8s.io/v1", "Role"): "Role",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "ClusterRole",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "RoleBinding",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "ClusterRoleBinding",
    ("scheduling.k8s.io/v1", "PriorityClass"): "PriorityClass",
    ("policy/v1", "PodDisruptionBudget"): "PodDisruptionBudget",
    ("networking.k8s.io/v1", "Ingress"): "Ingress",
    ("authentication.k8s.io/v1", "TokenRequest"): "TokenRequest",
    ("authentication.k8s.io/v1", "SelfSubjectReview"): "SelfSubjectReview",
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): "SelfSubjectAccessReview",
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): "SelfSubjectRulesReview",
}
"""(apiVersion, kind) → the message describing the object."""


MESSAGES: Final[dict[str, dict[int, Field]]] = {
    # k8s.io/apimachinery/pkg/apis/meta/v1
    "ObjectMeta": {
        1: ("name", "string", "omit"),
        2: ("generateName", "string", "omit"),
        3: ("namespace", "string", "omit"),
        4: ("selfLink", "string", "omit"),
        5: ("uid", "string", "omit"),
        6: ("resourceVersion", "string", "omit"),
        7: ("generation", "int64", "omit"),
        8: ("creationTimestamp", "Time", "omit"),
        9: ("deletionTimestamp", "Time", "keep"),
        10: ("deletionGracePeriodSeconds", "int64", "keep"),
        11: ("labels", "map<string,string>", "omit"),
        12: ("annotations", "map<string,string>", "omit"),
        13: ("ownerReferences", "OwnerReference", "list"),
        14: ("finalizers", "string", "list"),
        17: ("managedFields", "ManagedFieldsEntry", "list"),
    },
    "OwnerReference": {
        1: ("kind", "string", "keep"),
        3: ("name", "string", "keep"),
        4: ("uid", "string", "keep"),
        5: ("apiVersion", "string", "keep"),
        6: ("controller", "bool", "keep"),
        7: ("blockOwnerDeletion", "bool", "keep"),
    },
    "ManagedFieldsEntry": {
        1: ("manager", "string", "omit"),
        2: ("operation", "string", "omit"),
        3: ("apiVersion", "string", "omit"),
        4: ("time", "Time", "keep"),
        6: ("fieldsType", "string", "omit"),
        7: ("fieldsV1", "FieldsV1", "keep"),
        8: ("subresource", "string", "omit"),
    },
    "Condition": {
        1: ("type", "string", "keep"),
        2: ("status", "string", "keep"),
        3: ("observedGeneration", "int64", "omit"),
        4: ("lastTransitionTime", "Time", "keep"),
        5: ("reason", "string", "keep"),
        6: ("message", "string", "keep"),
    },
    "LabelSelector": {
        1: ("matchLabels", "map<string,string>", "omit"),
        2: ("matchExpressions", "LabelSelectorRequirement", "list"),
    },
    "LabelSelectorRequirement": {
        1: ("key", "string", "keep"),
        2: ("operator", "string", "keep"),
        3: ("values", "string", "list"),
    },
    "FieldSelectorRequirement": {
        1: ("key", "string", "keep"),
        2: ("operator", "string", "keep"),
        3: ("values", "string", "list"),
    },
    # k8s.io/api/core/v1
    "Namespace": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("spec", "NamespaceSpec", "keep"),
        3: ("status", "NamespaceStatus", "keep"),
    },
    "NamespaceSpec": {
        1: ("finalizers", "string", "list"),
    },
    "NamespaceStatus": {
        1: ("phase", "string", "omit"),
        2: ("conditions", "NamespaceCondition", "list"),
    },
    "NamespaceCondition": {
        1: ("type", "string", "keep"),
        2: ("status", "string", "keep"),
        4: ("lastTransitionTime", "Time", "keep"),
        5: ("reason", "string", "omit"),
        6: ("message", "string", "omit"),
    },
    "ConfigMap": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("data", "map<string,string>", "omit"),
        3: ("binaryData", "map<string,bytes>", "omit"),
        4: ("immutable", "bool", "keep"),
    },
    "Secret": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("data", "map<string,bytes>", "omit"),
        3: ("type", "string", "omit"),
        4: ("stringData", "map<string,string>", "omit"),
        5: ("immutable", "bool", "keep"),
    },
    "ServiceAccount": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("secrets", "ObjectReference", "list"),
        3: ("imagePullSecrets", "LocalObjectReference", "list"),
        4: ("automountServiceAccountToken", "bool", "keep"),
    },
    "ObjectReference": {
        1: ("kind", "string", "omit"),
        2: ("namespace", "string", "omit"),
        3: ("name", "string", "omit"),
        4: ("uid", "string", "omit"),
        5: ("apiVersion", "string", "omit"),
        6: ("resourceVersion", "string", "omit"),
        7: ("fieldPath", "string", "omit"),
    },
    "LocalObjectReference": {
        1: ("name", "string", "omit"),
    },
    "Service": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("spec", "ServiceSpec", "keep"),
        3: ("status", "ServiceStatus", "keep"),
    },
    "ServiceSpec": {
        1: ("ports", "ServicePort", "list"),
        2: ("selector", "map<string,string>", "omit"),
        3: ("clusterIP", "string", "omit"),
        4: ("type", "string", "omit"),
        5: ("externalIPs", "string", "list"),
        7: ("sessionAffinity", "string", "omit"),
        8: ("loadBalancerIP", "string", "omit"),
        9: ("loadBalancerSourceRanges", "string", "list"),
        10: ("externalName", "string", "omit"),
        11: ("externalTrafficPolicy", "string", "omit"),
        12: ("healthCheckNodePort", "int32", "omit"),
        13: ("publishNotReadyAddresses", "bool", "omit"),
        14: ("sessionAffinityConfig", "SessionAffinityConfig", "keep"),
        17: ("ipFamilyPolicy", "string", "keep"),
        18: ("clusterIPs", "string", "list"),
        19: ("ipFamilies", "string", "list"),
        20: ("allocateLoadBalancerNodePorts", "bool", "keep"),
        21: ("loadBalancerClass", "string", "keep"),
        22: ("internalTrafficPolicy", "string", "keep"),
        23: ("trafficDistribution", "string", "keep"),
    },
    "ServicePort": {
        1: ("name", "string", "omit"),
        2: ("protocol", "string", "omit"),
        3: ("port", "int32", "keep"),
        4: ("targetPort", "IntOrString", "keep"),
        5: ("nodePort", "int32", "omit"),
        6: ("appProtocol", "string", "keep"),
    },
    "SessionAffinityConfig": {
        1: ("clientIP", "ClientIPConfig", "keep"),
    },
    "ClientIPConfig": {
        1: ("timeoutSeconds", "int32", "keep"),
    },
    "ServiceStatus": {
        1: ("loadBalancer", "LoadBalancerStatus", "keep"),
        2: ("conditions", "Condition", "list"),
    },
    "LoadBalancerStatus": {
        1: ("ingress", "LoadBalancerIngress", "list"),
    },
    "LoadBalancerIngress": {
        1: ("ip", "string", "omit"),
        2: ("hostname", "string", "omit"),
        3: ("ipMode", "string", "keep"),
        4: ("ports", "PortStatus", "list"),
    },
    "PortStatus": {
        1: ("port", "int32", "keep"),
        2: ("protocol", "string", "keep"),
        3: ("error", "string", "keep"),
    },
    "ResourceQuota": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("spec", "ResourceQuotaSpec", "keep"),
        3: ("status", "ResourceQuotaStatus", "keep"),
    },
    "ResourceQuotaSpec": {
        1: ("hard", "map<string,Quantity>", "omit"),
        2: ("scopes", "string", "list"),
        3: ("scopeSelector", "ScopeSelector", "keep"),
    },
    "ScopeSelector": {
        1: ("matchExpressions", "ScopedResourceSelectorRequirement", "list"),
    },
    "ScopedResourceSelectorRequirement": {
        1: ("scopeName", "string", "keep"),
        2: ("operator", "string", "keep"),
        3: ("values", "string", "list"),
    },
    "ResourceQuotaStatus": {
        1: ("hard", "map<string,Quantity>", "omit"),
        2: ("used", "map<string,Quantity>", "omit"),
    },
    "Pod": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("spec", "PodSpec", "keep"),
        3: ("status", "PodStatus", "keep"),
    },
    # What a client creating a pod can send (kubectl debug sends it empty); the kubelet's
    # container and resource-claim statuses (8, 10, 13, 15, 18) are never sent this way.
    "PodStatus": {
        1: ("phase", "string", "omit"),
        2: ("conditions", "PodCondition", "list"),
        3: ("message", "string", "omit"),
        4: ("reason", "string", "omit"),
        5: ("hostIP", "string", "omit"),
        6: ("podIP", "string", "omit"),
        7: ("startTime", "Time", "keep"),
        9: ("qosClass", "string", "omit"),
        11: ("nominatedNodeName", "string", "omit"),
        12: ("podIPs", "PodIP", "list"),
        14: ("resize", "string", "omit"),
        16: ("hostIPs", "PodIP", "list"),  # HostIP: the same single ip = 1
        17: ("observedGeneration", "int64", "omit"),
        19: ("allocatedResources", "map<string,Quantity>", "omit"),
        20: ("resources", "ResourceRequirements", "keep"),
    },
    "PodCondition": {
        1: ("type", "string", "keep"),
        2: ("status", "string", "keep"),
        3: ("lastProbeTime", "Time", "omit"),
        4: ("lastTransitionTime", "Time", "omit"),
        5: ("reason", "string", "omit"),
        6: ("message", "string", "omit"),
        7: ("observedGeneration", "int64", "omit"),
    },
    "PodIP": {
        1: ("ip", "string", "keep"),
    },
    "PodTemplateSpec": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("spec", "PodSpec", "keep"),
    },
    "PodSpec": {
        1: ("volumes", "Volume", "list"),
        2: ("containers", "Container", "list"),
        3: ("restartPolicy", "string", "omit"),
        4: ("terminationGracePeriodSeconds", "int64", "keep"),
        5: ("activeDeadlineSeconds", "int64", "keep"),
        6: ("dnsPolicy", "string", "omit"),
        7: ("nodeSelector", "map<string,string>", "omit"),
        8: ("serviceAccountName", "string", "omit"),
        9: ("serviceAccount", "string", "omit"),
        10: ("nodeName", "string", "omit"),
        11: ("hostNetwork", "bool", "omit"),
        12: ("hostPID", "bool", "omit"),
        13: ("hostIPC", "bool", "omit"),
        14: ("securityContext", "PodSecurityContext", "keep"),
        15: ("imagePullSecrets", "LocalObjectReference", "list"),
        16: ("hostname", "string", "omit"),
        17: ("subdomain", "string", "omit"),
        18: ("affinity", "Affinity", "keep"),
        19: ("schedulerName", "string", "omit"),
        20: ("initContainers", "Container", "list"),
        21: ("automountServiceAccountToken", "bool", "keep"),
        22: ("tolerations", "Toleration", "list"),
        23: ("hostAliases", "HostAlias", "list"),
        24: ("priorityClassName", "string", "omit"),
        25: ("priority", "int32", "keep"),
        26: ("dnsConfig", "PodDNSConfig", "keep"),
        27: ("shareProcessNamespace", "bool", "keep"),
        28: ("readinessGates", "PodReadinessGate", "list"),
        29: ("runtimeClassName", "string", "keep"),
        30: ("enableServiceLinks", "bool", "keep"),
        31: ("preemptionPolicy", "string", "keep"),
        32: ("overhead", "map<string,Quantity>", "omit"),
        33: ("topologySpreadConstraints", "TopologySpreadConstraint", "list"),
        34: ("ephemeralContainers", "EphemeralContainer", "list"),
        35: ("setHostnameAsFQDN", "bool", "keep"),
        36: ("os", "PodOS", "keep"),
        37: ("hostUsers", "bool", "keep"),
        38: ("schedulingGates", "PodSchedulingGate", "list"),
        39: ("resourceClaims", "PodResourceClaim", "list"),
        40: ("resources", "ResourceRequirements", "keep"),
        41: ("hostnameOverride", "string", "keep"),
        43: ("schedulingGroup", "PodSchedulingGroup", "keep"),
    },
    "Volume": {
        1: ("name", "string", "keep"),
        2: ("", "VolumeSource", "keep"),
    },
    "VolumeSource": {
        1: ("hostPath", "HostPathVolumeSource", "keep"),
        2: ("emptyDir", "EmptyDirVolumeSource", "keep"),
        3: ("gcePersistentDisk", "GCEPersistentDiskVolumeSource", "keep"),
        4: ("awsElasticBlockStore", "AWSElasticBlockStoreVolumeSource", "keep"),
        5: ("gitRepo", "GitRepoVolumeSource", "keep"),
        6: ("secret", "SecretVolumeSource", "keep"),
        7: ("nfs", "NFSVolumeSource", "keep"),
        8: ("iscsi", "ISCSIVolumeSource", "keep"),
        9: ("glusterfs", "GlusterfsVolumeSource", "keep"),
        10: ("persistentVolumeClaim", "PersistentVolumeClaimVolumeSource", "keep"),
        11: ("rbd", "RBDVolumeSource", "keep"),
        12: ("flexVolume", "FlexVolumeSource", "keep"),
        13: ("cinder", "CinderVolumeSource", "keep"),
        14: ("cephfs", "CephFSVolumeSource", "keep"),
        15: ("flocker", "FlockerVolumeSource", "keep"),
        16: ("downwardAPI", "DownwardAPIVolumeSource", "keep"),
        17: ("fc", "FCVolumeSource", "keep"),
        18: ("azureFile", "AzureFileVolumeSource", "keep"),
        19: ("configMap", "ConfigMapVolumeSource", "keep"),
        20: ("vsphereVolume", "VsphereVirtualDiskVolumeSource", "keep"),
        21: ("quobyte", "QuobyteVolumeSource", "keep"),
        22: ("azureDisk", "AzureDiskVolumeSource", "keep"),
        23: ("photonPersistentDisk", "PhotonPersistentDiskVolumeSource", "keep"),
        24: ("portworxVolume", "PortworxVolumeSource", "keep"),
        25: ("scaleIO", "ScaleIOVolumeSource", "keep"),
        26: ("projected", "ProjectedVolumeSource", "keep"),
        27: ("storageos", "StorageOSVolumeSource", "keep"),
        28: ("csi", "CSIVolumeSource", "keep"),
        29: ("ephemeral", "EphemeralVolumeSource", "keep"),
        30: ("image", "ImageVolumeSource", "keep"),
    },
    "HostPathVolumeSource": {
        1: ("path", "string", "keep"),
        2: ("type", "string", "keep"),
    },
    "EmptyDirVolumeSource": {
        1: ("medium", "string", "omit"),
        2: ("sizeLimit", "Quantity", "keep"),
    },
    "GCEPersistentDiskVolumeSource": {
        1: ("pdName", "string", "keep"),
        2: ("fsType", "string", "omit"),
        3: ("partition", "int32", "omit"),
        4: ("readOnly", "bool", "omit"),
    },
    "AWSElasticBlockStoreVolumeSource": {
        1: ("volumeID", "string", "keep"),
        2: ("fsType", "string", "omit"),
        3: ("partition", "int32", "omit"),
        4: ("readOnly", "bool", "omit"),
    },
    "GitRepoVolumeSource": {
        1: ("repository", "string", "keep"),
        2: ("revision", "string", "omit"),
        3: ("directory", "string", "omit"),
    },
    "SecretVolumeSource": {
        1: ("secretName", "string", "omit"),
        2: ("items", "KeyToPath", "list"),
        3: ("defaultMode", "int32", "keep"),
        4: ("optional", "bool", "keep"),
    },
    "KeyToPath": {
        1: ("key", "string", "keep"),
        2: ("path", "string", "keep"),
        3: ("mode", "int32", "keep"),
    },
    "NFSVolumeSource": {
        1: ("server", "string", "keep"),
        2: ("path", "string", "keep"),
        3: ("readOnly", "bool", "omit"),
    },
    "ISCSIVolumeSource": {
        1: ("targetPortal", "string", "keep"),
        2: ("iqn", "string", "keep"),
        3: ("lun", "int32", "keep"),
        4: ("iscsiInterface", "string", "omit"),
        5: ("fsType", "string", "omit"),
        6: ("readOnly", "bool", "omit"),
        7: ("portals", "string", "list"),
        8: ("chapAuthDiscovery", "bool", "omit"),
        10: ("secretRef", "LocalObjectReference", "keep"),
        11: ("chapAuthSession", "bool", "omit"),
        12: ("initiatorName", "string", "keep"),
    },
    "GlusterfsVolumeSource": {
        1: ("endpoints", "string", "keep"),
        2: ("path", "string", "keep"),
        3: ("readOnly", "bool", "omit"),
    },
    "PersistentVolumeClaimVolumeSource": {
        1: ("claimName", "string", "keep"),
        2: ("readOnly", "bool", "omit"),
    },
    "RBDVolumeSource": {
        1: ("monitors", "string", "list"),
        2: ("image", "string", "keep"),
        3: ("fsType", "string", "omit"),
        4: ("pool", "string", "omit"),
        5: ("user", "string", "omit"),
        6: ("keyring", "string", "omit"),
        7: ("secretRef", "LocalObjectReference", "keep"),
        8: ("readOnly", "bool", "omit"),
    },
    "FlexVolumeSource": {
        1: ("driver", "string", "keep"),
        2: ("fsType", "string", "omit"),
        3: ("secretRef", "LocalObjectReference", "keep"),
        4: ("readOnly", "bool", "omit"),
        5: ("options", "map<string,string>", "omit"),
    },
    "CinderVolumeSource": {
        1: ("volumeID", "string", "keep"),
        2: ("fsType", "string", "omit"),
        3: ("readOnly", "bool", "omit"),
        4: ("secretRef", "LocalObjectReference", "keep"),
    },
    "CephFSVolumeSource": {
        1: ("monitors", "string", "list"),
        2: ("path", "string", "omit"),
        3: ("user", "string", "omit"),
        4: ("secretFile", "string", "omit"),
        5: ("secretRef", "LocalObjectReference", "keep"),
        6: ("readOnly", "bool", "omit"),
    },
    "FlockerVolumeSource": {
        1: ("datasetName", "string", "omit"),
        2: ("datasetUUID", "string", "omit"),
    },
    "DownwardAPIVolumeSource": {
        1: ("items", "DownwardAPIVolumeFile", "list"),
        2: ("defaultMode", "int32", "keep"),
    },
    "DownwardAPIVolumeFile": {
        1: ("path", "string", "keep"),
        2: ("fieldRef", "ObjectFieldSelector", "keep"),
        3: ("resourceFieldRef", "ResourceFieldSelector", "keep"),
        4: ("mode", "int32", "keep"),
    },
    "ObjectFieldSelector": {
        1: ("apiVersion", "string", "omit"),
        2: ("fieldPath", "string", "keep"),
    },
    "ResourceFieldSelector": {
        1: ("containerName", "string", "omit"),
        2: ("resource", "string", "keep"),
        3: ("divisor", "Quantity", "keep"),
    },
    "FCVolumeSource": {
        1: ("targetWWNs", "string", "list"),
        2: ("lun", "int32", "keep"),
        3: ("fsType", "string", "omit"),
        4: ("readOnly", "bool", "omit"),
        5: ("wwids", "string", "list"),
    },
    "AzureFileVolumeSource": {
        1: ("secretName", "string", "keep"),
        2: ("shareName", "string", "keep"),
        3: ("readOnly", "bool", "omit"),
    },
    "ConfigMapVolumeSource": {
        1: ("", "LocalObjectReference", "keep"),
        2: ("items", "KeyToPath", "list"),
        3: ("defaultMode", "int32", "keep"),
        4: ("optional", "bool", "keep"),
    },
    "VsphereVirtualDiskVolumeSource": {
        1: ("volumePath", "string", "keep"),
        2: ("fsType", "string", "omit"),
        3: ("storagePolicyName", "string", "omit"),
        4: ("storagePolicyID", "string", "omit"),
    },
    "QuobyteVolumeSource": {
        1: ("registry", "string", "keep"),
        2: ("volume", "string", "keep"),
        3: ("readOnly", "bool", "omit"),
        4: ("user", "string", "omit"),
        5: ("group", "string", "omit"),
        6: ("tenant", "string", "omit"),
    },
    "AzureDiskVolumeSource": {
        1: ("diskName", "string", "keep"),
        2: ("diskURI", "string", "keep"),
        3: ("cachingMode", "string", "keep"),
        4: ("fsType", "string", "keep"),
        5: ("readOnly", "bool", "keep"),
        6: ("kind", "string", "keep"),
    },
    "PhotonPersistentDiskVolumeSource": {
        1: ("pdID", "string", "keep"),
        2: ("fsType", "string", "omit"),
    },
    "ProjectedVolumeSource": {
        1: ("sources", "VolumeProjection", "list"),
        2: ("defaultMode", "int32", "keep"),
    },
    "VolumeProjection": {
        1: ("secret", "SecretProjection", "keep"),
        2: ("downwardAPI", "DownwardAPIProjection", "keep"),
        3: ("configMap", "ConfigMapProjection", "keep"),
        4: ("serviceAccountToken", "ServiceAccountTokenProjection", "keep"),
        5: ("clusterTrustBundle", "ClusterTrustBundleProjection", "keep"),
        6: ("podCertificate", "PodCertificateProjection", "keep"),
    },
    "SecretProjection": {
        1: ("", "LocalObjectReference", "keep"),
        2: ("items", "KeyToPath", "list"),
        4: ("optional", "bool", "keep"),
    },
    "DownwardAPIProjection": {
        1: ("items", "DownwardAPIVolumeFile", "list"),
    },
    "ConfigMapProjection": {
        1: ("", "LocalObjectReference", "keep"),
        2: ("items", "KeyToPath", "list"),
        4: ("optional", "bool", "keep"),
    },
    "ServiceAccountTokenProjection": {
        1: ("audience", "string", "omit"),
        2: ("expirationSeconds", "int64", "keep"),
        3: ("path", "string", "keep"),
    },
    "ClusterTrustBundleProjection": {
        1: ("name", "string", "keep"),
        2: ("signerName", "string", "keep"),
        3: ("labelSelector", "LabelSelector", "keep"),
        4: ("path", "string", "keep"),
        5: ("optional", "bool", "keep"),
    },
    "PodCertificateProjection": {
        1: ("signerName", "string", "omit"),
        2: ("keyType", "string", "omit"),
        3: ("maxExpirationSeconds", "int32", "keep"),
        4: ("credentialBundlePath", "string", "omit"),
        5: ("keyPath", "string", "omit"),
        6: ("certificateChainPath", "string", "omit"),
        7: ("userAnnotations", "map<string,string>", "omit"),
    },
    "PortworxVolumeSource": {
        1: ("volumeID", "string", "keep"),
        2: ("fsType", "string", "omit"),
        3: ("readOnly", "bool", "omit"),
    },
    "ScaleIOVolumeSource": {
        1: ("gateway", "string", "keep"),
        2: ("system", "string", "keep"),
        3: ("secretRef", "LocalObjectReference", "keep"),
        4: ("sslEnabled", "bool", "omit"),
        5: ("protectionDomain", "string", "omit"),
        6: ("storagePool", "string", "omit"),
        7: ("storageMode", "string", "omit"),
        8: ("volumeName", "string", "omit"),
        9: ("fsType", "string", "omit"),
        10: ("readOnly", "bool", "omit"),
    },
    "StorageOSVolumeSource": {
        1: ("volumeName", "string", "omit"),
        2: ("volumeNamespace", "string", "omit"),
        3: ("fsType", "string", "omit"),
        4: ("readOnly", "bool", "omit"),
        5: ("secretRef", "LocalObjectReference", "keep"),
    },
    "CSIVolumeSource": {
        1: ("driver", "string", "keep"),
        2: ("readOnly", "bool", "keep"),
        3: ("fsType", "string", "keep"),
        4: ("volumeAttributes", "map<string,string>", "omit"),
        5: ("nodePublishSecretRef", "LocalObjectReference", "keep"),
    },
    "EphemeralVolumeSource": {
        1: ("volumeClaimTemplate", "PersistentVolumeClaimTemplate", "keep"),
    },
    "PersistentVolumeClaimTemplate": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("spec", "PersistentVolumeClaimSpec", "keep"),
    },
    "PersistentVolumeClaimSpec": {
        1: ("accessModes", "string", "list"),
        2: ("resources", "VolumeResourceRequirements", "keep"),
        3: ("volumeName", "string", "omit"),
        4: ("selector", "LabelSelector", "keep"),
        5: ("storageClassName", "string", "keep"),
        6: ("volumeMode", "string", "keep"),
        7: ("dataSource", "TypedLocalObjectReference", "keep"),
        8: ("dataSourceRef", "TypedObjectReference", "keep"),
        9: ("volumeAttributesClassName", "string", "keep"),
    },
    "VolumeResourceRequirements": {
        1: ("limits", "map<string,Quantity>", "omit"),
        2: ("requests", "map<string,Quantity>", "omit"),
    },
    "TypedLocalObjectReference": {
        1: ("apiGroup", "string", "keep"),
        2: ("kind", "string", "keep"),
        3: ("name", "string", "keep"),
    },
    "TypedObjectReference": {
        1: ("apiGroup", "string", "keep"),
        2: ("kind", "string", "keep"),
        3: ("name", "string", "keep"),
        4: ("namespace", "string", "keep"),
    },
    "ImageVolumeSource": {
        1: ("reference", "string", "omit"),
        2: ("pullPolicy", "string", "omit"),
    },
    "Container": {
        1: ("name", "string", "keep"),
        2: ("image", "string", "omit"),
        3: ("command", "string", "list"),
        4: ("args", "string", "list"),
        5: ("workingDir", "string", "omit"),
        6: ("ports", "ContainerPort", "list"),
        7: ("env", "EnvVar", "list"),
        8: ("resources", "ResourceRequirements", "keep"),
        9: ("volumeMounts", "VolumeMount", "list"),
        10: ("livenessProbe", "Probe", "keep"),
        11: ("readinessProbe", "Probe", "keep"),
        12: ("lifecycle", "Lifecycle", "keep"),
        13: ("terminationMessagePath", "string", "omit"),
        14: ("imagePullPolicy", "string", "omit"),
        15: ("securityContext", "SecurityContext", "keep"),
        16: ("stdin", "bool", "omit"),
        17: ("stdinOnce", "bool", "omit"),
        18: ("tty", "bool", "omit"),
        19: ("envFrom", "EnvFromSource", "list"),
        20: ("terminationMessagePolicy", "string", "omit"),
        21: ("volumeDevices", "VolumeDevice", "list"),
        22: ("startupProbe", "Probe", "keep"),
        23: ("resizePolicy", "ContainerResizePolicy", "list"),
        24: ("restartPolicy", "string", "keep"),
        25: ("restartPolicyRules", "ContainerRestartRule", "list"),
    },
    "ContainerPort": {
        1: ("name", "string", "omit"),
        2: ("hostPort", "int32", "omit"),
        3: ("containerPort", "int32", "keep"),
        4: ("protocol", "string", "omit"),
        5: ("hostIP", "string", "omit"),
    },
    "EnvFromSource": {
        1: ("prefix", "string", "omit"),
        2: ("configMapRef", "ConfigMapEnvSource", "keep"),
        3: ("secretRef", "SecretEnvSource", "keep"),
    },
    "ConfigMapEnvSource": {
        1: ("", "LocalObjectReference", "keep"),
        2: ("optional", "bool", "keep"),
    },
    "SecretEnvSource": {
        1: ("", "LocalObjectReference", "keep"),
        2: ("optional", "bool", "keep"),
    },
    "EnvVar": {
        1: ("name", "string", "keep"),
        2: ("value", "string", "omit"),
        3: ("valueFrom", "EnvVarSource", "keep"),
    },
    "EnvVarSource": {
        1: ("fieldRef", "ObjectFieldSelector", "keep"),
        2: ("resourceFieldRef", "ResourceFieldSelector", "keep"),
        3: ("configMapKeyRef", "ConfigMapKeySelector", "keep"),
        4: ("secretKeyRef", "SecretKeySelector", "keep"),
        5: ("fileKeyRef", "FileKeySelector", "keep"),
    },
    "ConfigMapKeySelector": {
        1: ("", "LocalObjectReference", "keep"),
        2: ("key", "string", "keep"),
        3: ("optional", "bool", "keep"),
    },
    "SecretKeySelector": {
        1: ("", "LocalObjectReference", "keep"),
        2: ("key", "string", "keep"),
        3: ("optional", "bool", "keep"),
    },
    "FileKeySelector": {
        1: ("volumeName", "string", "keep"),
        2: ("path", "string", "keep"),
        3: ("key", "string", "keep"),
        4: ("optional", "bool", "keep"),
    },
    "ResourceRequirements": {
        1: ("limits", "map<string,Quantity>", "omit"),
        2: ("requests", "map<string,Quantity>", "omit"),
        3: ("claims", "ResourceClaim", "list"),
    },
    "ResourceClaim": {
        1: ("name", "string", "keep"),
        2: ("request", "string", "omit"),
    },
    "ContainerResizePolicy": {
        1: ("resourceName", "string", "keep"),
        2: ("restartPolicy", "string", "keep"),
    },
    "ContainerRestartRule": {
        1: ("action", "string", "omit"),
        2: ("exitCodes", "ContainerRestartRuleOnExitCodes", "keep"),
    },
    "ContainerRestartRuleOnExitCodes": {
        1: ("operator", "string", "omit"),
        2: ("values", "int32", "list"),
    },
    "VolumeMount": {
        1: ("name", "string", "keep"),
        2: ("readOnly", "bool", "omit"),
        3: ("mountPath", "string", "keep"),
        4: ("subPath", "string", "omit"),
        5: ("mountPropagation", "string", "keep"),
        6: ("subPathExpr", "string", "omit"),
        7: ("recursiveReadOnly", "string", "keep"),
    },
    "VolumeDevice": {
        1: ("name", "string", "keep"),
        2: ("devicePath", "string", "keep"),
    },
    "Probe": {
        1: ("", "ProbeHandler", "keep"),
        2: ("initialDelaySeconds", "int32", "omit"),
        3: ("timeoutSeconds", "int32", "omit"),
        4: ("periodSeconds", "int32", "omit"),
        5: ("successThreshold", "int32", "omit"),
        6: ("failureThreshold", "int32", "omit"),
        7: ("terminationGracePeriodSeconds", "int64", "keep"),
    },
    "ProbeHandler": {
        1: ("exec", "ExecAction", "keep"),
        2: ("httpGet", "HTTPGetAction", "keep"),
        3: ("tcpSocket", "TCPSocketAction", "keep"),
        4: ("grpc", "GRPCAction", "keep"),
    },
    "ExecAction": {
        1: ("command", "string", "list"),
    },
    "HTTPGetAction": {
        1: ("path", "string", "omit"),
        2: ("port", "IntOrString", "keep"),
        3: ("host", "string", "omit"),
        4: ("scheme", "string", "omit"),
        5: ("httpHeaders", "HTTPHeader", "list"),
    },
    "HTTPHeader": {
        1: ("name", "string", "keep"),
        2: ("value", "string", "keep"),
    },
    "TCPSocketAction": {
        1: ("port", "IntOrString", "keep"),
        2: ("host", "string", "omit"),
    },
    "GRPCAction": {
        1: ("port", "int32", "keep"),
        2: ("service", "string", "keep"),
    },
    "Lifecycle": {
        1: ("postStart", "LifecycleHandler", "keep"),
        2: ("preStop", "LifecycleHandler", "keep"),
        3: ("stopSignal", "string", "keep"),
    },
    "LifecycleHandler": {
        1: ("exec", "ExecAction", "keep"),
        2: ("httpGet", "HTTPGetAction", "keep"),
        3: ("tcpSocket", "TCPSocketAction", "keep"),
        4: ("sleep", "SleepAction", "keep"),
    },
    "SleepAction": {
        1: ("seconds", "int64", "keep"),
    },
    "SecurityContext": {
        1: ("capabilities", "Capabilities", "keep"),
        2: ("privileged", "bool", "keep"),
        3: ("seLinuxOptions", "SELinuxOptions", "keep"),
        4: ("runAsUser", "int64", "keep"),
        5: ("runAsNonRoot", "bool", "keep"),
        6: ("readOnlyRootFilesystem", "bool", "keep"),
        7: ("allowPrivilegeEscalation", "bool", "keep"),
        8: ("runAsGroup", "int64", "keep"),
        9: ("procMount", "string", "keep"),
        10: ("windowsOptions", "WindowsSecurityContextOptions", "keep"),
        11: ("seccompProfile", "SeccompProfile", "keep"),
        12: ("appArmorProfile", "AppArmorProfile", "keep"),
    },
    "Capabilities": {
        1: ("add", "string", "list"),
        2: ("drop", "string", "list"),
    },
    "SELinuxOptions": {
        1: ("user", "string", "omit"),
        2: ("role", "string", "omit"),
        3: ("type", "string", "omit"),
        4: ("level", "string", "omit"),
    },
    "WindowsSecurityContextOptions": {
        1: ("gmsaCredentialSpecName", "string", "keep"),
        2: ("gmsaCredentialSpec", "string", "keep"),
        3: ("runAsUserName", "string", "keep"),
        4: ("hostProcess", "bool", "keep"),
    },
    "SeccompProfile": {
        1: ("type", "string", "keep"),
        2: ("localhostProfile", "string", "keep"),
    },
    "AppArmorProfile": {
        1: ("type", "string", "keep"),
        2: ("localhostProfile", "string", "keep"),
    },
    "EphemeralContainer": {
        1: ("", "EphemeralContainerCommon", "keep"),
        2: ("targetContainerName", "string", "omit"),
    },
    "PodSecurityContext": {
        1: ("seLinuxOptions", "SELinuxOptions", "keep"),
        2: ("runAsUser", "int64", "keep"),
        3: ("runAsNonRoot", "bool", "keep"),
        4: ("supplementalGroups", "int64", "list"),
        5: ("fsGroup", "int64", "keep"),
        6: ("runAsGroup", "int64", "keep"),
        7: ("sysctls", "Sysctl", "list"),
        8: ("windowsOptions", "WindowsSecurityContextOptions", "keep"),
        9: ("fsGroupChangePolicy", "string", "keep"),
        10: ("seccompProfile", "SeccompProfile", "keep"),
        11: ("appArmorProfile", "AppArmorProfile", "keep"),
        12: ("supplementalGroupsPolicy", "string", "keep"),
        13: ("seLinuxChangePolicy", "string", "keep"),
    },
    "Sysctl": {
        1: ("name", "string", "keep"),
        2: ("value", "string", "keep"),
    },
    "Affinity": {
        1: ("nodeAffinity", "NodeAffinity", "keep"),
        2: ("podAffinity", "PodAffinity", "keep"),
        3: ("podAntiAffinity", "PodAntiAffinity", "keep"),
    },
    "NodeAffinity": {
        1: ("requiredDuringSchedulingIgnoredDuringExecution", "NodeSelector", "keep"),
        2: ("preferredDuringSchedulingIgnoredDuringExecution", "PreferredSchedulingTerm", "list"),
    },
    "NodeSelector": {
        1: ("nodeSelectorTerms", "NodeSelectorTerm", "list"),
    },
    "NodeSelectorTerm": {
        1: ("matchExpressions", "NodeSelectorRequirement", "list"),
        2: ("matchFields", "NodeSelectorRequirement", "list"),
    },
    "NodeSelectorRequirement": {
        1: ("key", "string", "keep"),
        2: ("operator", "string", "keep"),
        3: ("values", "string", "list"),
    },
    "PreferredSchedulingTerm": {
        1: ("weight", "int32", "keep"),
        2: ("preference", "NodeSelectorTerm", "keep"),
    },
    "PodAffinity": {
        1: ("requiredDuringSchedulingIgnoredDuringExecution", "PodAffinityTerm", "list"),
        2: ("preferredDuringSchedulingIgnoredDuringExecution", "WeightedPodAffinityTerm", "list"),
    },
    "PodAffinityTerm": {
        1: ("labelSelector", "LabelSelector", "keep"),
        2: ("namespaces", "string", "list"),
        3: ("topologyKey", "string", "keep"),
        4: ("namespaceSelector", "LabelSelector", "keep"),
        5: ("matchLabelKeys", "string", "list"),
        6: ("mismatchLabelKeys", "string", "list"),
    },
    "WeightedPodAffinityTerm": {
        1: ("weight", "int32", "keep"),
        2: ("podAffinityTerm", "PodAffinityTerm", "keep"),
    },
    "PodAntiAffinity": {
        1: ("requiredDuringSchedulingIgnoredDuringExecution", "PodAffinityTerm", "list"),
        2: ("preferredDuringSchedulingIgnoredDuringExecution", "WeightedPodAffinityTerm", "list"),
    },
    "Toleration": {
        1: ("key", "string", "omit"),
        2: ("operator", "string", "omit"),
        3: ("value", "string", "omit"),
        4: ("effect", "string", "omit"),
        5: ("tolerationSeconds", "int64", "keep"),
    },
    "HostAlias": {
        1: ("ip", "string", "keep"),
        2: ("hostnames", "string", "list"),
    },
    "PodDNSConfig": {
        1: ("nameservers", "string", "list"),
        2: ("searches", "string", "list"),
        3: ("options", "PodDNSConfigOption", "list"),
    },
    "PodDNSConfigOption": {
        1: ("name", "string", "omit"),
        2: ("value", "string", "keep"),
    },
    "PodReadinessGate": {
        1: ("conditionType", "string", "keep"),
    },
    "TopologySpreadConstraint": {
        1: ("maxSkew", "int32", "keep"),
        2: ("topologyKey", "string", "keep"),
        3: ("whenUnsatisfiable", "string", "keep"),
        4: ("labelSelector", "LabelSelector", "keep"),
        5: ("minDomains", "int32", "keep"),
        6: ("nodeAffinityPolicy", "string", "keep"),
        7: ("nodeTaintsPolicy", "string", "keep"),
        8: ("matchLabelKeys", "string", "list"),
    },
    "PodOS": {
        1: ("name", "string", "keep"),
    },
    "PodSchedulingGate": {
        1: ("name", "string", "keep"),
    },
    "PodResourceClaim": {
        1: ("name", "string", "keep"),
        3: ("resourceClaimName", "string", "keep"),
        4: ("resourceClaimTemplateName", "string", "keep"),
    },
    "PodSchedulingGroup": {
        1: ("podGroupName", "string", "keep"),
    },
    # k8s.io/api/apps/v1
    "Deployment": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("spec", "DeploymentSpec", "keep"),
        3: ("status", "DeploymentStatus", "keep"),
    },
    "DeploymentSpec": {
        1: ("replicas", "int32", "keep"),
        2: ("selector", "LabelSelector", "keep"),
        3: ("template", "PodTemplateSpec", "keep"),
        4: ("strategy", "DeploymentStrategy", "keep"),
        5: ("minReadySeconds", "int32", "omit"),
        6: ("revisionHistoryLimit", "int32", "keep"),
        7: ("paused", "bool", "omit"),
        9: ("progressDeadlineSeconds", "int32", "keep"),
    },
    "DeploymentStrategy": {
        1: ("type", "string", "omit"),
        2: ("rollingUpdate", "RollingUpdateDeployment", "keep"),
    },
    "RollingUpdateDeployment": {
        1: ("maxUnavailable", "IntOrString", "keep"),
        2: ("maxSurge", "IntOrString", "keep"),
    },
    "DeploymentStatus": {
        1: ("observedGeneration", "int64", "omit"),
        2: ("replicas", "int32", "omit"),
        3: ("updatedReplicas", "int32", "omit"),
        4: ("availableReplicas", "int32", "omit"),
        5: ("unavailableReplicas", "int32", "omit"),
        6: ("conditions", "DeploymentCondition", "list"),
        7: ("readyReplicas", "int32", "omit"),
        8: ("collisionCount", "int32", "keep"),
        9: ("terminatingReplicas", "int32", "keep"),
    },
    "DeploymentCondition": {
        1: ("type", "string", "keep"),
        2: ("status", "string", "keep"),
        4: ("reason", "string", "omit"),
        5: ("message", "string", "omit"),
        6: ("lastUpdateTime", "Time", "keep"),
        7: ("lastTransitionTime", "Time", "keep"),
    },
    # k8s.io/api/batch/v1
    "Job": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("spec", "JobSpec", "keep"),
        3: ("status", "JobStatus", "keep"),
    },
    "JobSpec": {
        1: ("parallelism", "int32", "keep"),
        2: ("completions", "int32", "keep"),
        3: ("activeDeadlineSeconds", "int64", "keep"),
        4: ("selector", "LabelSelector", "keep"),
        5: ("manualSelector", "bool", "keep"),
        6: ("template", "PodTemplateSpec", "keep"),
        7: ("backoffLimit", "int32", "keep"),
        8: ("ttlSecondsAfterFinished", "int32", "keep"),
        9: ("completionMode", "string", "keep"),
        10: ("suspend", "bool", "keep"),
        11: ("podFailurePolicy", "PodFailurePolicy", "keep"),
        12: ("backoffLimitPerIndex", "int32", "keep"),
        13: ("maxFailedIndexes", "int32", "keep"),
        14: ("podReplacementPolicy", "string", "keep"),
        15: ("managedBy", "string", "keep"),
        16: ("successPolicy", "SuccessPolicy", "keep"),
    },
    "PodFailurePolicy": {
        1: ("rules", "PodFailurePolicyRule", "list"),
    },
    "PodFailurePolicyRule": {
        1: ("action", "string", "keep"),
        2: ("onExitCodes", "PodFailurePolicyOnExitCodesRequirement", "keep"),
        3: ("onPodConditions", "PodFailurePolicyOnPodConditionsPattern", "list"),
    },
    "PodFailurePolicyOnExitCodesRequirement": {
        1: ("containerName", "string", "keep"),
        2: ("operator", "string", "keep"),
        3: ("values", "int32", "list"),
    },
    "PodFailurePolicyOnPodConditionsPattern": {
        1: ("type", "string", "keep"),
        2: ("status", "string", "keep"),
    },
    "SuccessPolicy": {
        1: ("rules", "SuccessPolicyRule", "list"),
    },
    "SuccessPolicyRule": {
        1: ("succeededIndexes", "string", "keep"),
        2: ("succeededCount", "int32", "keep"),
    },
    "JobStatus": {
        1: ("conditions", "JobCondition", "list"),
        2: ("startTime", "Time", "keep"),
        3: ("completionTime", "Time", "keep"),
        4: ("active", "int32", "omit"),
        5: ("succeeded", "int32", "omit"),
        6: ("failed", "int32", "omit"),
        7: ("completedIndexes", "string", "omit"),
        8: ("uncountedTerminatedPods", "UncountedTerminatedPods", "keep"),
        9: ("ready", "int32", "keep"),
        10: ("failedIndexes", "string", "keep"),
        11: ("terminating", "int32", "keep"),
    },
    "JobCondition": {
        1: ("type", "string", "keep"),
        2: ("status", "string", "keep"),
        3: ("lastProbeTime", "Time", "keep"),
        4: ("lastTransitionTime", "Time", "keep"),
        5: ("reason", "string", "omit"),
        6: ("message", "string", "omit"),
    },
    "UncountedTerminatedPods": {
        1: ("succeeded", "string", "list"),
        2: ("failed", "string", "list"),
    },
    "CronJob": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("spec", "CronJobSpec", "keep"),
        3: ("status", "CronJobStatus", "keep"),
    },
    "CronJobSpec": {
        1: ("schedule", "string", "keep"),
        2: ("startingDeadlineSeconds", "int64", "keep"),
        3: ("concurrencyPolicy", "string", "omit"),
        4: ("suspend", "bool", "keep"),
        5: ("jobTemplate", "JobTemplateSpec", "keep"),
        6: ("successfulJobsHistoryLimit", "int32", "keep"),
        7: ("failedJobsHistoryLimit", "int32", "keep"),
        8: ("timeZone", "string", "keep"),
    },
    "JobTemplateSpec": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("spec", "JobSpec", "keep"),
    },
    "CronJobStatus": {
        1: ("active", "ObjectReference", "list"),
        4: ("lastScheduleTime", "Time", "keep"),
        5: ("lastSuccessfulTime", "Time", "keep"),
    },
    # k8s.io/api/rbac/v1
    "Role": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("rules", "PolicyRule", "list"),
    },
    "PolicyRule": {
        1: ("verbs", "string", "list"),
        2: ("apiGroups", "string", "list"),
        3: ("resources", "string", "list"),
        4: ("resourceNames", "string", "list"),
        5: ("nonResourceURLs", "string", "list"),
    },
    "ClusterRole": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("rules", "PolicyRule", "list"),
        3: ("aggregationRule", "AggregationRule", "keep"),
    },
    "AggregationRule": {
        1: ("clusterRoleSelectors", "LabelSelector", "list"),
    },
    "RoleBinding": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("subjects", "Subject", "list"),
        3: ("roleRef", "RoleRef", "keep"),
    },
    "Subject": {
        1: ("kind", "string", "keep"),
        2: ("apiGroup", "string", "omit"),
        3: ("name", "string", "keep"),
        4: ("namespace", "string", "omit"),
    },
    "RoleRef": {
        1: ("apiGroup", "string", "keep"),
        2: ("kind", "string", "keep"),
        3: ("name", "string", "keep"),
    },
    "ClusterRoleBinding": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("subjects", "Subject", "list"),
        3: ("roleRef", "RoleRef", "keep"),
    },
    # k8s.io/api/scheduling/v1
    "PriorityClass": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("value", "int32", "keep"),
        3: ("globalDefault", "bool", "omit"),
        4: ("description", "string", "omit"),
        5: ("preemptionPolicy", "string", "keep"),
    },
    # k8s.io/api/policy/v1
    "PodDisruptionBudget": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("spec", "PodDisruptionBudgetSpec", "keep"),
        3: ("status", "PodDisruptionBudgetStatus", "keep"),
    },
    "PodDisruptionBudgetSpec": {
        1: ("minAvailable", "IntOrString", "keep"),
        2: ("selector", "LabelSelector", "keep"),
        3: ("maxUnavailable", "IntOrString", "keep"),
        4: ("unhealthyPodEvictionPolicy", "string", "keep"),
    },
    "PodDisruptionBudgetStatus": {
        1: ("observedGeneration", "int64", "omit"),
        2: ("disruptedPods", "map<string,Time>", "omit"),
        3: ("disruptionsAllowed", "int32", "keep"),
        4: ("currentHealthy", "int32", "keep"),
        5: ("desiredHealthy", "int32", "keep"),
        6: ("expectedPods", "int32", "keep"),
        7: ("conditions", "Condition", "list"),
    },
    # k8s.io/api/networking/v1
    "Ingress": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("spec", "IngressSpec", "keep"),
        3: ("status", "IngressStatus", "keep"),
    },
    "IngressSpec": {
        1: ("defaultBackend", "IngressBackend", "keep"),
        2: ("tls", "IngressTLS", "list"),
        3: ("rules", "IngressRule", "list"),
        4: ("ingressClassName", "string", "keep"),
    },
    "IngressBackend": {
        3: ("resource", "TypedLocalObjectReference", "keep"),
        4: ("service", "IngressServiceBackend", "keep"),
    },
    "IngressServiceBackend": {
        1: ("name", "string", "keep"),
        2: ("port", "ServiceBackendPort", "keep"),
    },
    "ServiceBackendPort": {
        1: ("name", "string", "omit"),
        2: ("number", "int32", "omit"),
    },
    "IngressTLS": {
        1: ("hosts", "string", "list"),
        2: ("secretName", "string", "omit"),
    },
    "IngressRule": {
        1: ("host", "string", "omit"),
        2: ("", "IngressRuleValue", "keep"),
    },
    "IngressRuleValue": {
        1: ("http", "HTTPIngressRuleValue", "keep"),
    },
    "HTTPIngressRuleValue": {
        1: ("paths", "HTTPIngressPath", "list"),
    },
    "HTTPIngressPath": {
        1: ("path", "string", "omit"),
        2: ("backend", "IngressBackend", "keep"),
        3: ("pathType", "string", "keep"),
    },
    "IngressStatus": {
        1: ("loadBalancer", "IngressLoadBalancerStatus", "keep"),
    },
    "IngressLoadBalancerStatus": {
        1: ("ingress", "IngressLoadBalancerIngress", "list"),
    },
    "IngressLoadBalancerIngress": {
        1: ("ip", "string", "omit"),
        2: ("hostname", "string", "omit"),
        4: ("ports", "IngressPortStatus", "list"),
    },
    "IngressPortStatus": {
        1: ("port", "int32", "keep"),
        2: ("protocol", "string", "keep"),
        3: ("error", "string", "keep"),
    },
    # k8s.io/api/authentication/v1
    "TokenRequest": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("spec", "TokenRequestSpec", "keep"),
        3: ("status", "TokenRequestStatus", "keep"),
    },
    "TokenRequestSpec": {
        1: ("audiences", "string", "list"),
        3: ("boundObjectRef", "BoundObjectReference", "keep"),
        4: ("expirationSeconds", "int64", "keep"),
    },
    "BoundObjectReference": {
        1: ("kind", "string", "omit"),
        2: ("apiVersion", "string", "omit"),
        3: ("name", "string", "omit"),
        4: ("uid", "string", "omit"),
    },
    "TokenRequestStatus": {
        1: ("token", "string", "keep"),
        2: ("expirationTimestamp", "Time", "keep"),
    },
    "SelfSubjectReview": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("status", "SelfSubjectReviewStatus", "keep"),
    },
    "SelfSubjectReviewStatus": {
        1: ("userInfo", "UserInfo", "keep"),
    },
    "UserInfo": {
        1: ("username", "string", "omit"),
        2: ("uid", "string", "omit"),
        3: ("groups", "string", "list"),
        4: ("extra", "map<string,ExtraValue>", "omit"),
    },
    # k8s.io/api/authorization/v1
    "SelfSubjectAccessReview": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("spec", "SelfSubjectAccessReviewSpec", "keep"),
        3: ("status", "SubjectAccessReviewStatus", "keep"),
    },
    "SelfSubjectAccessReviewSpec": {
        1: ("resourceAttributes", "ResourceAttributes", "keep"),
        2: ("nonResourceAttributes", "NonResourceAttributes", "keep"),
    },
    "ResourceAttributes": {
        1: ("namespace", "string", "omit"),
        2: ("verb", "string", "omit"),
        3: ("group", "string", "omit"),
        4: ("version", "string", "omit"),
        5: ("resource", "string", "omit"),
        6: ("subresource", "string", "omit"),
        7: ("name", "string", "omit"),
        8: ("fieldSelector", "FieldSelectorAttributes", "keep"),
        9: ("labelSelector", "LabelSelectorAttributes", "keep"),
    },
    "FieldSelectorAttributes": {
        1: ("rawSelector", "string", "omit"),
        2: ("requirements", "FieldSelectorRequirement", "list"),
    },
    "LabelSelectorAttributes": {
        1: ("rawSelector", "string", "omit"),
        2: ("requirements", "LabelSelectorRequirement", "list"),
    },
    "NonResourceAttributes": {
        1: ("path", "string", "omit"),
        2: ("verb", "string", "omit"),
    },
    "SubjectAccessReviewStatus": {
        1: ("allowed", "bool", "keep"),
        2: ("reason", "string", "omit"),
        3: ("evaluationError", "string", "omit"),
        4: ("denied", "bool", "omit"),
    },
    "SelfSubjectRulesReview": {
        1: ("metadata", "ObjectMeta", "keep"),
        2: ("spec", "SelfSubjectRulesReviewSpec", "keep"),
        3: ("status", "SubjectRulesReviewStatus", "keep"),
    },
    "SelfSubjectRulesReviewSpec": {
        1: ("namespace", "string", "omit"),
    },
    "SubjectRulesReviewStatus": {
        1: ("resourceRules", "ResourceRule", "list"),
        2: ("nonResourceRules", "NonResourceRule", "list"),
        3: ("incomplete", "bool", "keep"),
        4: ("evaluationError", "string", "omit"),
    },
    "ResourceRule": {
        1: ("verbs", "string", "list"),
        2: ("apiGroups", "string", "list"),
        3: ("resources", "string", "list"),
        4: ("resourceNames", "string", "list"),
    },
    "NonResourceRule": {
        1: ("verbs", "string", "list"),
        2: ("nonResourceURLs", "string", "list"),
    },
}
"""Every message reachable from ``KINDS``: name → {field number: (json name, type, presence)}.

The type is a scalar (``SCALARS``), a special message (``SPECIALS``), another entry's name, or
``map<string,T>``.  Names are the messages' own; none of the kinds here reaches two messages of
one name in different packages.
"""

# An ephemeral container is a container (same fields, same numbers) plus a target, inlined.
MESSAGES["EphemeralContainerCommon"] = MESSAGES["Container"]
