"""``/openapi/v2`` as protobuf: the gnostic ``openapi.v2.Document`` that kubectl downloads
(``Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf``) to validate objects
on the client when the server cannot validate fields itself for a kind (every kind without a
PATCH operation, such as the access reviews, and ``List``).

Only what a Swagger 2.0 document of definitions needs is encoded, by hand (the wire format is
small and fixed): the document's ``swagger``, ``info`` and ``definitions``, and per schema the
fields gnostic's ``Schema`` message has, with field numbers from gnostic's OpenAPIv2.proto.
JSON Schema keywords Swagger 2.0 lacks (``anyOf``, ``nullable``) are left out, which leaves a
schema open, as upstream's int-or-string is.  Values that are free-form in the JSON (defaults,
enums, ``x-`` extensions) travel as YAML (JSON) text in gnostic's ``Any``.
"""

from __future__ import annotations

import json
import struct
from typing import Any

MEDIA_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
"""The media type of the answer (kube-openapi's; ``@`` is not valid in a Content-Type)."""
ACCEPTED = (MEDIA_TYPE, "application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
"""What a client may ask for to get it; kubectl sends the older spelling with ``@``."""


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _bytes(number: int, data: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _string(number: int, text: str) -> bytes:
    return _bytes(number, text.encode()) if text else b""


def _int(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value) if value else b""


def _double(number: int, value: float) -> bytes:
    return _varint(number << 3 | 1) + struct.pack("<d", value)


def _any(number: int, value: Any) -> bytes:
    """gnostic's ``Any``: the value as YAML text (field 2); JSON is YAML."""
    return _bytes(number, _string(2, json.dumps(value)))


def _named(number: int, name: str, value: bytes) -> bytes:
    return _bytes(number, _string(1, name) + _bytes(2, value))


_STRINGS = {"$ref": 1, "format": 2, "title": 3, "description": 4, "pattern": 13}
_INTEGERS = {
    "maxLength": 11,
    "minLength": 12,
    "maxItems": 14,
    "minItems": 15,
    "maxProperties": 17,
    "minProperties": 18,
}
_BOOLEANS = {"exclusiveMaximum": 8, "exclusiveMinimum": 10, "uniqueItems": 16, "readOnly": 27}
_DOUBLES = {"multipleOf": 6, "maximum": 7, "minimum": 9}


def schema(node: dict[str, Any]) -> bytes:
    """One JSON schema as gnostic's ``Schema`` message."""
    out = bytearray()
    for key, value in node.items():
        if key in _STRINGS and isinstance(value, str):
            out += _string(_STRINGS[key], value)
        elif key in _INTEGERS and isinstance(value, int):
            out += _int(_INTEGERS[key], value)
        elif key in _BOOLEANS and isinstance(value, bool):
            out += _int(_BOOLEANS[key], int(value))
        elif key in _DOUBLES and isinstance(value, int | float):
            out += _double(_DOUBLES[key], float(value))
        elif key == "default":
            out += _any(5, value)
        elif key == "required" and isinstance(value, list):
            out += b"".join(_string(19, str(name)) for name in value)
        elif key == "enum" and isinstance(value, list):
            out += b"".join(_any(20, item) for item in value)
        elif key == "additionalProperties":
            if isinstance(value, bool):
                out += _bytes(21, _varint(2 << 3) + _varint(int(value)))
            elif isinstance(value, dict):
                out += _bytes(21, _bytes(1, schema(value)))
        elif key == "type":
            types = value if isinstance(value, list) else [value]
            out += _bytes(22, b"".join(_string(1, str(t)) for t in types))
        elif key == "items":
            items = value if isinstance(value, list) else [value]
            out += _bytes(23, b"".join(_bytes(1, schema(i)) for i in items if isinstance(i, dict)))
        elif key == "allOf" and isinstance(value, list):
            out += b"".join(_bytes(24, schema(i)) for i in value if isinstance(i, dict))
        elif key == "properties" and isinstance(value, dict):
            out += _bytes(
                25,
                b"".join(
                    _named(1, name, schema(sub))
                    for name, sub in value.items()
                    if isinstance(sub, dict)
                ),
            )
        elif key == "example":
            out += _any(30, value)
        elif key.startswith("x-"):
            out += _bytes(31, _string(1, key) + _any(2, value))
    return bytes(out)


def document(swagger: dict[str, Any]) -> bytes:
    """A Swagger 2.0 document (``openapi.swagger_v2()``) as gnostic's ``Document``."""
    info = swagger.get("info", {})
    definitions = swagger.get("definitions", {})
    return (
        _string(1, str(swagger.get("swagger", "2.0")))
        + _bytes(
            2, _string(1, str(info.get("title", ""))) + _string(2, str(info.get("version", "")))
        )
        + _bytes(8, b"")
        + _bytes(9, b"".join(_named(1, name, schema(s)) for name, s in definitions.items()))
    )
