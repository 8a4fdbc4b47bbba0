"""Kubernetes protobuf bodies: decoded into the JSON-shaped dicts the server works on, and
encoded back, driven by the kind declarations in ``kube.api``.

kubectl's generator commands (``create namespace|configmap|secret|deployment|service|job|
cronjob|role|clusterrole|rolebinding|clusterrolebinding|quota|priorityclass|
poddisruptionbudget|ingress|serviceaccount|token``, ``auth can-i``, ``auth whoami``) and
``debug`` (the pod of ``--copy-to`` and of ``node/NAME``) build typed objects and POST them
with ``Content-Type: application/vnd.kubernetes.protobuf``; ``certificate approve|deny`` PUT
the CertificateSigningRequest to ``/approval`` the same way.  Such a body is an envelope::

    b"k8s\\x00"  +  runtime.Unknown {
        1: typeMeta  TypeMeta {1: apiVersion, 2: kind}
        2: raw       bytes    -- the object, in the k8s.io/api generated.proto field numbers
        3: contentEncoding    -- always empty from kubectl
        4: contentType        -- likewise
    }

``decode_body`` opens the envelope, looks the kind up in ``tables().kinds`` and turns the
object into exactly what the client would have sent as JSON: JSON field names, int64 as int,
``bytes`` as base64 text, ``Time`` as RFC 3339 (``2024-01-01T00:00:00Z``), ``Quantity`` as its
string, ``IntOrString`` as int or str, map entries (key=1, value=2) as dicts, repeated fields
as lists, inline structs (``VolumeSource`` in ``Volume``, ``ProbeHandler`` in ``Probe``, ...)
merged into their parent, and an inline struct's own inline structs likewise (``Rule`` in
``RuleWithOperations`` in ``NamedRuleWithOperations``).  The rest of the server then never
knows which encoding arrived.
``encode_body`` is its inverse and writes what Go writes (fields in number order, value fields
always, map entries sorted by key): kubectl's bodies come back byte for byte, which is how the
tests hold the declarations to upstream's numbers.  It also writes the server's answers when a
client prefers protobuf (client-go's typed clients: the controller-manager, the kubelet,
kubectl's generator commands and describe): objects, their lists, meta/v1 Status,
PartialObjectMetadata and the legacy discovery documents (``/api``, ``/apis``, ``/apis/G``,
``/apis/G/V``), and, each framed by ``watch_frame``, watch events.

The tables.  Every field number is declared once, on the field, beside its type
(``meta(proto=N)``, see ``kube.api.struct``); ``tables()`` derives the messages and kinds from
those declarations on first use (the first protobuf request, not the server's start: reading
every kind's type hints takes a good part of a second).  A kind has a message when all of its
own fields carry a number (``metadata`` alone does not count); then every struct it reaches must
number all of its fields, or building the tables fails naming the field.  Its list (``PodList``)
is ``ResourceList``'s numbered fields with items of the kind's message; Status,
PartialObjectMetadata(List) and the discovery documents are numbered in ``kube.api.meta_v1``.
The wire type of a field comes from its Python type: ``str``/``int``/``bool``/``float`` are
string/int32 (int64 when declared so)/bool/double; ``datetime`` is ``Time``; a field declared
with the quantity format is ``Quantity``; ``int | str`` is ``IntOrString``; ``int | float`` is a
double (a JSON number: a whole one decodes as an int, as Go writes it); free-form JSON is
``FieldsV1`` (the JSON bytes in field 1, as apiextensions' ``JSON`` too); a ``str`` declared
``base64`` is ``bytes``; ``dict[str, T]`` is a map, and ``dict[str, list[str]]`` a map of
``ExtraValue`` (a message of the strings at 1, which a list of strings declared ``wrapped`` also
is); a struct is the message of the same name.  A ``str`` declared with the micro-time format is
``MicroTime``: ``Time``'s message, its nanos written and read to the microsecond
(``2024-01-01T00:00:00.123456Z``).  Any other union of two types (a bool or a list among them)
is a message of its two alternatives, at 1 and 2 in the order declared, as upstream's
``JSONSchemaPropsOrBool``, ``JSONSchemaPropsOrArray`` and ``JSONSchemaPropsOrStringArray``: its
JSON is the alternative set (a non-empty list, else a message, else the bool), and the bool, a
Go value field, is always written (true beside a schema, which allows).

Absent and zero.  Go's protobuf encoder always writes value (non-pointer) fields, zeros
included, and writes pointer fields only when set; Go's JSON encoder drops zero values of
``omitempty`` value fields.  So a table row is ``number: (json name, type, presence)``, presence
being ``"list"`` for a repeated field and, for a singular one, ``"omit"`` (a field declared
``omitempty``, and maps: dropped when it decodes to ""/0/false, or to a null Time) or ``"keep"``
(pointer fields, fields without ``omitempty``, messages: kept whatever the value).  Fields not
on the wire are left out.  A zero ``metav1.Time`` travels as an empty message and decodes to
``None`` (JSON null) as in Go; ``metadata.creationTimestamp`` is ``omitzero`` since 1.34, so a
zero one is dropped, as kubectl's own JSON does.  An empty repeated field is indistinguishable
from an absent one on the wire and is left out (Go would print ``null`` for the few without
``omitempty``, e.g. ``rules`` of an aggregated ClusterRole; both mean an empty list).

Why tables and not generated classes: the wire format is five rules, and the declarations
already carry the JSON names and omitempty facts that generated protobuf classes would not.  A
field number missing from a table is an error naming message and number, never silently
dropped, so a newer kubectl sending a new field is noticed rather than lost.  The numbers follow
k8s.io/api and k8s.io/apimachinery release-1.36 generated.proto; the presence marks follow the
Go struct tags of the same release.
"""

from __future__ import annotations

import base64
import functools
import json
import struct
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import (
    Annotated,
    Any,
    Final,
    Literal,
    NamedTuple,
    get_args,
    get_origin,
    get_type_hints,
)

import msgspec
from msgspec import inspect as mi

from kube.api.meta_v1 import (
    APIGroup,
    APIGroupList,
    APIResourceList,
    APIVersions,
    PartialObjectMetadata,
    PartialObjectMetadataList,
    Resource,
    ResourceList,
    Status,
)
from kube.api.scheme import SCHEME
from kube.api.struct import MICRO_TIME, QUANTITY, ProtoField, Struct, field_meta, proto_field
from kube.api.typeinfo import type_tree

MAGIC: Final = b"k8s\x00"

Presence = Literal["omit", "keep", "list"]
Field = tuple[str, str, Presence]
"""One table row: JSON name ("" = inline into the parent), type, presence."""

SCALARS: Final = frozenset({"string", "int32", "int64", "bool", "bytes", "double"})
SPECIALS: Final = frozenset(
    {"Time", "MicroTime", "Quantity", "IntOrString", "FieldsV1", "ExtraValue"}
)
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
        number: float = struct.unpack("<d", value.to_bytes(8, "little"))[0]
        # Go's JSON writes a whole float64 below 1e21 as an integer: 5, not 5.0.
        return int(number) if number.is_integer() and abs(number) < 1e21 else number
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


def _time(kind: str, data: bytes, where: str) -> str | None:
    """metav1.Time or MicroTime: empty is Go's zero time (JSON null).  Nanos outside a second
    carry into the seconds (Go's ``time.Unix``); then a Time's are dropped and a MicroTime's cut
    to microseconds, as Go's JSON has them."""
    if not data:
        return None
    seconds = nanos = 0
    for number, wire, value in _fields(data, where):
        if number == 1:
            seconds = _scalar("int64", wire, value, f"{where}.seconds")
        elif number == 2:
            nanos = _scalar("int32", wire, value, f"{where}.nanos")
        else:
            raise ProtobufError(f"{where}: unknown field number {number} in {kind}")
    carried, nanos = divmod(nanos, 10**9)
    try:
        moment = _EPOCH + timedelta(seconds=seconds + carried)
    except OverflowError:
        raise ProtobufError(f"{where}: time {seconds}s is out of range") from None
    fraction = f".{nanos // 1000:06d}" if kind == "MicroTime" else ""
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T"
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}{fraction}Z"
    )


def _special(kind: str, data: bytes, where: str) -> Any:
    if kind in ("Time", "MicroTime"):
        return _time(kind, data, where)
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
    if kind.startswith("either<"):
        return _either(kind, value, where)
    return _message(kind, value)


def _alternatives(kind: str) -> list[str]:
    """The two types of ``either<A,B>``; ``[T]`` is a list of T."""
    return kind[len("either<") : -1].split(",")


def _either(kind: str, data: bytes, where: str) -> Any:
    """A value of one of two types: the most specific one set (a non-empty list, then a
    message), else the scalar, its zero when absent."""
    alternatives = _alternatives(kind)
    found: dict[str, Any] = {}
    for number, wire, value in _fields(data, where):
        if number not in (1, 2):
            raise ProtobufError(f"{where}: unknown field number {number} in {kind}")
        alternative = alternatives[number - 1]
        if alternative.startswith("["):
            item = _single(alternative[1:-1], wire, value, where)
            found.setdefault(alternative, []).append(item)
        else:
            found[alternative] = _single(alternative, wire, value, where)
    for alternative in sorted(alternatives, key=lambda a: (not a.startswith("["), a in SCALARS)):
        if alternative in found:
            return found[alternative]
        if alternative in SCALARS:
            return _ZEROS[alternative]
    return None


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
    """A message as a JSON object, following ``tables().messages[name]``."""
    table = tables().messages[name]
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

    Raises ``ProtobufError`` for a body without the magic, malformed wire data, an object
    nested too deeply, an envelope with a content encoding, or a kind without a table here.
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
    try:
        obj = _message(_kind(api_version, kind), raw)
    except RecursionError:
        # A recursive message (JSONSchemaProps) nested deeper than the stack, as JSON's limit.
        raise ProtobufError("object nested too deeply") from None
    return {"kind": kind, "apiVersion": api_version, **obj}


def _kind(api_version: str, kind: str) -> str:
    """The message of a kind, which must have one."""
    name = tables().kinds.get((api_version, kind))
    if name is None:
        raise ProtobufError(f"no protobuf schema for kind {kind!r} in apiVersion {api_version!r}")
    return name


# --- encoding ----------------------------------------------------------------------------------


def _key(number: int, wire: int) -> bytes:
    return _put_varint((number << 3) | wire)


def _put_varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative ints travel as their 64-bit two's complement
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _key(number, _LENGTH) + _put_varint(len(payload)) + payload


def _timestamp(text: str, where: str) -> tuple[int, int]:
    """The seconds since the epoch and the nanoseconds past them of an RFC 3339 time."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as error:
        raise ProtobufError(f"{where}: {text!r} is not an RFC 3339 time") from error
    if moment.tzinfo is None:
        raise ProtobufError(f"{where}: {text!r} has no time zone")
    return (moment - _EPOCH) // timedelta(seconds=1), moment.microsecond * 1000


def _encode_value(number: int, kind: str, value: Any, where: str) -> bytes:
    """One field of type ``kind`` holding ``value`` (its JSON form)."""
    if kind == "string":
        return _length_delimited(number, str(value).encode())
    if kind == "bytes":
        return _length_delimited(number, base64.b64decode(value))
    if kind in ("int32", "int64", "bool"):
        return _key(number, _VARINT) + _put_varint(int(value))
    if kind == "double":
        return _key(number, _FIXED64) + struct.pack("<d", value)
    payload: bytes
    if kind in ("Time", "MicroTime"):
        # Go writes a zero time as an empty message, any other as {seconds, nanos}; a Time
        # is whole seconds on the wire as in JSON.
        if value is None:
            payload = b""
        else:
            seconds, nanos = _timestamp(value, where)
            nanos = nanos if kind == "MicroTime" else 0
            payload = (
                _key(1, _VARINT) + _put_varint(seconds) + _key(2, _VARINT) + _put_varint(nanos)
            )
    elif kind == "Quantity":
        payload = _encode_value(1, "string", value, where)
    elif kind == "IntOrString":
        is_string = isinstance(value, str)
        payload = (
            _encode_value(1, "int64", int(is_string), where)
            + _encode_value(2, "int32", 0 if is_string else value, where)
            + _encode_value(3, "string", value if is_string else "", where)
        )
    elif kind == "FieldsV1":
        payload = b"" if value is None else _length_delimited(1, json.dumps(value).encode())
    elif kind == "ExtraValue":
        payload = b"".join(_encode_value(1, "string", item, where) for item in value)
    elif kind.startswith("either<"):
        payload = _encode_either(kind, value, where)
    else:
        payload = _encode_message(kind, value)
    return _length_delimited(number, payload)


def _encode_either(kind: str, value: Any, where: str) -> bytes:
    """The alternative ``value`` is, at its number; a scalar (bool) alternative is a Go value
    field, written always: true beside the other one (upstream's ``additionalProperties``
    schema sets ``allows``)."""
    out = bytearray()
    for number, alternative in enumerate(_alternatives(kind), 1):
        if alternative in SCALARS:
            scalar = value if isinstance(value, bool) else True
            out += _encode_value(number, alternative, scalar, where)
        elif alternative.startswith("["):
            if isinstance(value, list):
                for item in value:
                    out += _encode_value(number, alternative[1:-1], item, where)
        elif isinstance(value, dict):
            out += _encode_value(number, alternative, value, where)
    return bytes(out)


_ZEROS: Final[dict[str, Any]] = {
    "string": "",
    "int32": 0,
    "int64": 0,
    "bool": False,
    "double": 0.0,
    "Time": None,
    "MicroTime": None,
}
"""What Go writes for an ``omit`` field the JSON left out: its zero value."""


def _encode_message(name: str, obj: dict[str, Any]) -> bytes:
    """A message from its JSON object, the inverse of ``_message``, written as Go writes it:
    fields in number order, value fields always (zeros included), map entries by key."""
    out = bytearray()
    for number, (json_name, kind, presence) in sorted(tables().messages[name].items()):
        where = f"{name}.{json_name or kind}"
        if not json_name:
            out += _length_delimited(number, _encode_message(kind, obj))
        elif kind.startswith("map<"):
            value_kind = kind[len("map<string,") : -1]
            for key, item in sorted((obj.get(json_name) or {}).items()):
                entry = _encode_value(1, "string", key, where)
                entry += _encode_value(2, value_kind, item, f"{where}[{key!r}]")
                out += _length_delimited(number, entry)
        elif presence == "list":
            for item in obj.get(json_name) or ():
                out += _encode_value(number, kind, item, where)
        elif json_name in obj:
            out += _encode_value(number, kind, obj[json_name], where)
        elif presence == "omit":
            out += _encode_value(number, kind, _ZEROS[kind], where)
    return bytes(out)


def encode_body(obj: dict[str, Any]) -> bytes:
    """The ``application/vnd.kubernetes.protobuf`` body of an object given as its JSON dict (as
    ``decode_body`` returns it), byte for byte what kubectl sends for it.

    Raises ``ProtobufError`` for a kind without a table here or a Time that is not RFC 3339.
    """
    api_version, kind = obj.get("apiVersion") or "", obj.get("kind") or ""
    name = _kind(api_version, kind)
    type_meta = _encode_value(1, "string", api_version, "TypeMeta")
    type_meta += _encode_value(2, "string", kind, "TypeMeta")
    unknown = _length_delimited(1, type_meta) + _length_delimited(2, _encode_message(name, obj))
    return (
        MAGIC
        + unknown
        + _encode_value(3, "string", "", "Unknown")
        + _encode_value(4, "string", "", "Unknown")
    )


# --- the tables, derived from the kind declarations ---------------------------------------------


_SPECIAL_FORMATS: Final = {QUANTITY: "Quantity", MICRO_TIME: "MicroTime"}
"""Declared formats of a value whose message is not its Python type's."""


def _strip(t: mi.Type) -> tuple[mi.Type, str | None]:
    """A field type without annotations and None, and the special message its declared
    format makes it (``_SPECIAL_FORMATS``), if any."""
    special: str | None = None
    while True:
        if isinstance(t, mi.Metadata):
            special = special or _SPECIAL_FORMATS.get(field_meta(t.extra).format or "")
            t = t.type
            continue
        if isinstance(t, mi.UnionType):
            rest = tuple(u for u in t.types if not isinstance(u, mi.NoneType))
            if len(rest) == 1:
                t = rest[0]
                continue
            if len(rest) < len(t.types):
                t = mi.UnionType(rest)
                continue
        return t, special


_SCALAR_TYPES: Final[dict[type[mi.Type], str]] = {
    mi.StrType: "string",
    mi.BytesType: "bytes",
    mi.BoolType: "bool",
    mi.FloatType: "double",
    mi.DateTimeType: "Time",
    mi.AnyType: "FieldsV1",
}


class _Tables:
    """The tables of the messages reachable from some kinds, made from their declarations."""

    def __init__(self) -> None:
        self.messages: dict[str, dict[int, Field]] = {}
        self.classes: dict[str, type[Struct]] = {}
        self.inlined: dict[str, dict[int, Field]] = {}

    def _name(self, cls: type[Struct]) -> str:
        """A struct's message name: its class name, qualified by its module when another
        class has that name already (autoscaling/v1 and v2 each declare a
        HorizontalPodAutoscaler, as upstream's two packages do)."""
        name = cls.__name__
        if self.classes.setdefault(name, cls) is not cls:
            name = f"{cls.__module__.rpartition('.')[2]}.{name}"
            if self.classes.setdefault(name, cls) is not cls:
                raise TypeError(f"two messages named {name}: {self.classes[name]} and {cls}")
        return name

    def message(self, tree: mi.StructType) -> str:
        """The message name of a struct, its table (and those it reaches) made on first use.

        Nested structs are read from the tree of the kind that reaches them, which msgspec
        builds whole: asking for each struct's own tree would build the same nodes again."""
        cls = tree.cls
        assert issubclass(cls, Struct), cls  # kinds and what they reach are kubelab Structs
        name = self._name(cls)
        if name in self.messages:
            return name
        table: dict[int, Field] = {}
        self.messages[name] = table  # before the fields, so that a cycle ends here
        parts = {attr: part for part in cls.PROTO_EMBEDDED for attr in part.fields}
        inlined: dict[str, dict[int, Field]] = {part.message: {} for part in cls.PROTO_EMBEDDED}
        for f in tree.fields:
            number = _number(f)
            if number is None:
                if f.name in _ENVELOPE:
                    continue
                raise TypeError(f"{name}.{f.encode_name} has no protobuf field number")
            part = parts.get(f.name)
            into = table if part is None else inlined[part.message]
            if number.number in into:
                raise TypeError(f"{name}.{f.encode_name}: field number {number.number} twice")
            into[number.number] = self.field(f, number, f"{name}.{f.encode_name}")
        for part in cls.PROTO_EMBEDDED:
            into = inlined[part.within] if part.within else table
            if part.number in into:
                raise TypeError(f"{name}: field number {part.number} twice")
            into[part.number] = ("", part.message, "keep")
        for part in cls.PROTO_EMBEDDED:
            self.agree(self.inlined, part.message, inlined[part.message])
        return name

    @staticmethod
    def agree(messages: dict[str, dict[int, Field]], name: str, table: dict[int, Field]) -> None:
        """Add a message that may be declared more than once (inlined in several structs, or
        also a struct of its own): every declaration must give it the same fields."""
        if messages.setdefault(name, table) != table:
            raise TypeError(f"message {name} is declared with two different field sets")

    def field(self, f: mi.Field, number: ProtoField, where: str) -> Field:
        t, _ = _strip(f.type)
        if number.wrapped:  # a message {1: items}, as upstream's ExtraValue
            return (f.encode_name, "ExtraValue", "keep")
        if isinstance(t, mi.ListType):
            return (f.encode_name, self.type(t.item_type, number, where), "list")
        kind = self.type(f.type, number, where)
        presence: Presence = "omit" if number.omitempty or kind.startswith("map<") else "keep"
        return (f.encode_name, kind, presence)

    def type(self, declared: mi.Type, number: ProtoField, where: str) -> str:
        """The wire type of a value of the declared type: the special cases first."""
        t, special = _strip(declared)
        if special is not None:
            return special
        if isinstance(t, mi.StrType) and number.base64:
            return "bytes"
        if isinstance(t, mi.IntType):
            return "int64" if number.int64 else "int32"
        scalar = _SCALAR_TYPES.get(type(t))
        if scalar is not None:
            return scalar
        if isinstance(t, mi.UnionType):
            return self.union(t, number, where)
        if isinstance(t, mi.StructType) and issubclass(t.cls, Struct):
            return self.message(t)
        if isinstance(t, mi.DictType):
            value, _ = _strip(t.value_type)
            if isinstance(value, mi.ListType):
                return "map<string,ExtraValue>"  # upstream's only map of lists: a user's extra
            return f"map<string,{self.type(t.value_type, number, where)}>"
        raise TypeError(f"{where}: no protobuf wire type for {t}")

    def union(self, t: mi.UnionType, number: ProtoField, where: str) -> str:
        """``int | str`` is IntOrString, ``int | float`` a JSON number (double); another union
        of two types, a bool or a list among them, is upstream's message of the two
        alternatives, at 1 and 2 in the order declared (``JSONSchemaPropsOrBool``...)."""
        members = {type(u) for u in t.types}
        if members == {mi.IntType, mi.StrType}:
            return "IntOrString"
        if members == {mi.IntType, mi.FloatType}:
            return "double"
        alternatives = [
            f"[{self.type(u.item_type, number, where)}]"
            if isinstance(u, mi.ListType)
            else self.type(u, number, where)
            for u in t.types
        ]
        if len(alternatives) != 2 or not (set(alternatives) & SCALARS) <= {"bool"}:
            raise TypeError(f"{where}: no protobuf wire type for {t}")
        return f"either<{','.join(alternatives)}>"

    def tables(self) -> dict[str, dict[int, Field]]:
        """Every message made, inlined ones included."""
        for name, table in self.inlined.items():
            self.agree(self.messages, name, table)
        return self.messages


def _number(f: mi.Field) -> ProtoField | None:
    return proto_field(f.type.extra) if isinstance(f.type, mi.Metadata) else None


_ENVELOPE: Final = frozenset({"api_version", "kind"})
"""TypeMeta's fields: in the envelope, never in the object's message."""


def _declared(hint: Any) -> ProtoField | None:
    """The protobuf number a field's type hint carries, if any."""
    if get_origin(hint) is not Annotated:
        return None
    found = (proto_field(m.extra) for m in get_args(hint)[1:] if isinstance(m, msgspec.Meta))
    return next((number for number in found if number is not None), None)


def _protobuf_kinds() -> Iterator[type[Resource]]:
    """Every kind whose own fields all have protobuf numbers (metadata alone does not count).

    Read from the type hints: building every kind's msgspec tree would cost more than the rest
    of the import."""
    for info in SCHEME:
        own = [
            f
            for f in msgspec.structs.fields(info.cls)
            if f.name not in _ENVELOPE and f.name != "metadata"
        ]
        if own and all(_declared(f.type) is not None for f in own):
            yield info.cls


META_KINDS: Final = (
    Status,
    PartialObjectMetadata,
    PartialObjectMetadataList,
    APIVersions,
    APIGroupList,
    APIGroup,
    APIResourceList,
)
"""meta/v1's kinds the server answers with (Status, PartialObjectMetadata, the legacy
discovery documents): numbered in ``kube.api.meta_v1`` as upstream's meta/v1 generated.proto."""


def _list_table(item: str) -> dict[int, Field]:
    """A kind's list message (``PodList``): ``ResourceList``'s numbered fields, items of the
    kind's message, as every list in k8s.io/api has them."""
    hints = get_type_hints(ResourceList, include_extras=True)
    metadata, items = _declared(hints["metadata"]), _declared(hints["items"])
    assert metadata is not None and items is not None, "ResourceList's fields are numbered"
    return {
        metadata.number: ("metadata", "ListMeta", "keep"),
        items.number: ("items", item, "list"),
    }


class Tables(NamedTuple):
    """``kinds``: (apiVersion, kind) → the message of the object.  ``messages``: every message
    reachable from them, name → {field number: (json name, type, presence)}; the type is a
    scalar (``SCALARS``), a special message (``SPECIALS``), another entry's name, or
    ``map<string,T>``."""

    kinds: dict[tuple[str, str], str]
    messages: dict[str, dict[int, Field]]


@functools.cache
def tables() -> Tables:
    building = _Tables()
    kinds: dict[tuple[str, str], str] = {}
    lists: dict[str, dict[int, Field]] = {}
    for cls in _protobuf_kinds():
        tree = type_tree(cls)
        assert isinstance(tree, mi.StructType)
        name = kinds[(cls.API_VERSION, cls.KIND)] = building.message(tree)
        if "list" in cls.kind_info.verbs:  # reviews and requests have no lists upstream
            lists[f"{name}List"] = _list_table(name)
            kinds[(cls.API_VERSION, cls.kind_info.list_kind)] = f"{name}List"
    for meta_kind in META_KINDS:
        tree = type_tree(meta_kind)
        assert isinstance(tree, mi.StructType)
        kinds[(meta_kind.API_VERSION, meta_kind.KIND)] = building.message(tree)
    messages = building.tables()
    for name, table in lists.items():
        _Tables.agree(messages, name, table)
    return Tables(kinds, messages)


def has_message(api_version: str, kind: str) -> bool:
    """Whether objects of this kind travel as protobuf here (built-in kinds, their lists,
    Status, PartialObjectMetadata and the legacy discovery documents; not custom resources,
    Table or aggregated discovery)."""
    return (api_version, kind) in tables().kinds


def watch_frame(event_type: str, obj: bytes) -> bytes:
    """One event of an ``application/vnd.kubernetes.protobuf;stream=watch`` stream, as
    upstream's watch encoder writes it: the length of the event (4 bytes, big-endian, as
    apimachinery's LengthDelimitedFramer), then a meta/v1 WatchEvent {1: type, 2: object} in
    the raw serializer's encoding (no magic, no envelope), its object a RawExtension {1: raw}
    holding the object's own body as ``encode_body`` writes it."""
    event = _encode_value(1, "string", event_type, "WatchEvent")
    event += _length_delimited(2, _length_delimited(1, obj))
    return len(event).to_bytes(4, "big") + event
