"""Custom resources against their CustomResourceDefinition's ``openAPIV3Schema``.

Three walks over plain JSON values (dicts, lists, scalars) beside a structural schema (itself
plain JSON, as the CRD carries it), in upstream's order:

- ``prune``: drop the fields the schema does not specify (unless a node says
  ``x-kubernetes-preserve-unknown-fields``), and nulls of fields that are not ``nullable``;
  returns the paths of the dropped fields so that ``fieldValidation`` can report them as
  unknown fields;
- ``default``: fill ``default:`` values where a field is absent (or null), recursively;
- ``validate``: types (``integer`` against ``number``, ``x-kubernetes-int-or-string``,
  ``nullable``), ``required``, ``enum`` and the value constraints, with Kubernetes field paths
  and the error types and messages upstream's validator reports (``spec.replicas: Invalid
  value: 11: spec.replicas in body should be less than or equal to 10``); then, unless those
  found a blocking problem (a type, required, enum, too-long or too-many error: upstream then
  reports only that some rules were not checked), the CEL rules (``x-kubernetes-validations``)
  of every node the value has, objects, arrays and scalars, below ``properties``, ``items``,
  ``additionalProperties`` and ``allOf`` (``controlplane.apiserver.crd.cel`` evaluates one node's).
  Given the ``old`` object of an update, the transition rules (those using ``oldSelf``) are
  evaluated too, where the old object has a value at the same path;
  ``validate_transitions`` evaluates only those, for an update hook that runs after
  ``validate``.  One ``cel.Budget`` bounds the rule evaluations of each call.
"""

from __future__ import annotations

import base64
import copy
import datetime
import ipaddress
import json
import math
import re
import uuid
from collections.abc import Callable
from typing import Any

from controlplane.apiserver.crd import cel
from kube.api.errors import ROOT, ErrorList, ErrorType, FieldError, Path

Schema = dict[str, Any]

PRESERVE = "x-kubernetes-preserve-unknown-fields"
INT_OR_STRING = "x-kubernetes-int-or-string"
EMBEDDED = "x-kubernetes-embedded-resource"
EMBEDDED_FIELDS = ("apiVersion", "kind", "metadata")


# Pruning.


def prune(value: Any, schema: Schema | None, path: Path = ROOT) -> list[str]:
    """Drop, in place, what ``schema`` does not specify below ``value``; the dropped paths."""
    dropped: list[str] = []
    _prune(value, schema or {}, path, dropped)
    return dropped


def _prune(value: Any, schema: Schema, path: Path, dropped: list[str]) -> None:
    if isinstance(value, dict):
        properties: dict[str, Schema] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        preserve = bool(schema.get(PRESERVE)) or additional is True
        embedded = bool(schema.get(EMBEDDED))
        for key in list(value):
            child = path.child(str(key))
            if key in properties:
                sub = properties[key]
            elif isinstance(additional, dict):
                sub = additional
            elif preserve or (embedded and key in EMBEDDED_FIELDS):
                continue
            else:
                del value[key]
                dropped.append(str(child))
                continue
            if value[key] is None and not sub.get("nullable") and "default" not in sub:
                del value[key]
                continue
            _prune(value[key], sub, child, dropped)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                _prune(item, items, path.index(i), dropped)


# Defaulting.


def default(value: Any, schema: Schema | None) -> None:
    """Fill, in place, the ``default:`` of every absent (or null, not nullable) field."""
    if schema:
        _default(value, schema)


def _default(value: Any, schema: Schema) -> None:
    if isinstance(value, dict):
        properties: dict[str, Schema] = schema.get("properties") or {}
        for key, sub in properties.items():
            if "default" in sub and (
                key not in value or (value[key] is None and not sub.get("nullable"))
            ):
                value[key] = copy.deepcopy(sub["default"])
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            child: Schema | None = properties.get(key)
            if child is None and isinstance(additional, dict):
                child = additional
            if child:
                _default(item, child)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for item in value:
                _default(item, items)


# Validation.


def validate(
    value: Any, schema: Schema | None, path: Path, errors: ErrorList, old: Any = None
) -> None:
    """Append every problem of ``value`` against ``schema`` (at ``path``) to ``errors``, the
    CEL rules' included; ``old``: the object an update replaces (None on create)."""
    if schema:
        _validate(value, schema, path, errors)
        if cel.has_rules(schema) and not _blocked(errors):
            _validate_rules(value, old, schema, path, errors, cel.Budget(), False)


def validate_transitions(
    value: Any, old: Any, schema: Schema | None, path: Path, errors: ErrorList
) -> None:
    """Append the failures of the transition rules (those using ``oldSelf``) of an update from
    ``old`` to ``value``: what an update adds to ``validate(value, ...)`` run without ``old``.
    Nothing when ``errors`` already holds a blocking problem."""
    if schema and old is not None and cel.has_rules(schema) and not _blocked(errors):
        _validate_rules(value, old, schema, path, errors, cel.Budget(), True)


_BLOCKING = frozenset(
    {
        ErrorType.NOT_SUPPORTED,
        ErrorType.REQUIRED,
        ErrorType.TOO_LONG,
        ErrorType.TOO_MANY,
        ErrorType.TYPE_INVALID,
    }
)
RULES_NOT_CHECKED = (
    "some validation rules were not checked because the object was invalid; "
    "correct the existing errors to complete validation"
)


def _blocked(errors: ErrorList) -> bool:
    """Whether ``errors`` stops the CEL rules (as upstream's ``hasBlockingErr``); records so,
    once, when it does."""
    if not any(e.type in _BLOCKING for e in errors):
        return False
    if not any(e.detail == RULES_NOT_CHECKED for e in errors):
        errors.invalid(ROOT, "null", RULES_NOT_CHECKED)
    return True


def _validate_rules(
    value: Any,
    old: Any,
    schema: Schema,
    path: Path,
    errors: ErrorList,
    budget: cel.Budget,
    transitions_only: bool,
) -> None:
    """The CEL rules of ``value``'s node and of every node below it, ``old`` beside it."""
    if value is None or budget.exhausted():
        return
    cel.evaluate_rules(schema, value, old, path, errors, budget, transitions_only)
    for sub in schema.get("allOf") or ():
        if isinstance(sub, dict):
            _validate_rules(value, old, sub, path, errors, budget, transitions_only)
    if isinstance(value, dict):
        properties: dict[str, Schema] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        olds = old if isinstance(old, dict) else {}
        for key, item in value.items():
            if budget.exhausted():
                return
            if key in properties:
                sub_schema, child = properties[key], path.child(str(key))
            elif isinstance(additional, dict):
                sub_schema, child = additional, path.key(str(key))
            else:
                continue
            _validate_rules(
                item, olds.get(key), sub_schema, child, errors, budget, transitions_only
            )
    elif isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, dict):
            return
        correlated = _correlated_items(schema, old)
        for i, item in enumerate(value):
            if budget.exhausted():
                return
            old_item = correlated(item)
            _validate_rules(item, old_item, items, path.index(i), errors, budget, transitions_only)


def _correlated_items(schema: Schema, old: Any) -> Callable[[Any], Any]:
    """The old item of a new one: by the keys of an ``x-kubernetes-list-type: map`` list, none
    in any other list (upstream correlates only map lists)."""
    keys = schema.get("x-kubernetes-list-map-keys") or []
    if schema.get("x-kubernetes-list-type") != "map" or not keys or not isinstance(old, list):
        return lambda item: None

    def key_of(item: Any) -> str | None:
        if not isinstance(item, dict):
            return None
        return json.dumps([item.get(k) for k in keys], sort_keys=True)

    by_key = {key_of(item): item for item in old if key_of(item) is not None}
    return lambda item: by_key.get(key_of(item))


def json_type(value: Any) -> str:
    """The JSON schema type name of a value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_invalid(path: Path, found: str, wanted: str, errors: ErrorList) -> None:
    detail = f"{path} in body must be of type {wanted}: {json.dumps(found)}"
    errors.append(FieldError(ErrorType.TYPE_INVALID, str(path), found, detail))


def _type_ok(found: str, wanted: str) -> bool:
    return found == wanted or (wanted == "number" and found == "integer")


def _validate(value: Any, schema: Schema, path: Path, errors: ErrorList) -> None:
    if value is None:
        if schema.get("nullable") or not (schema.get("type") or schema.get(INT_OR_STRING)):
            return
        wanted = "integer,string" if schema.get(INT_OR_STRING) else str(schema["type"])
        _type_invalid(path, "null", wanted, errors)
        return
    found = json_type(value)
    if schema.get(INT_OR_STRING):
        if found not in ("integer", "string"):
            _type_invalid(path, found, "integer,string", errors)
            return
    elif schema.get("type") and not _type_ok(found, str(schema["type"])):
        _type_invalid(path, found, str(schema["type"]), errors)
        return
    _combinators(value, schema, path, errors)
    enum = schema.get("enum")
    if enum is not None and value not in enum:
        choices = ", ".join(json.dumps(v) for v in enum)
        errors.append(
            FieldError(ErrorType.NOT_SUPPORTED, str(path), value, f"supported values: {choices}")
        )
    if isinstance(value, str):
        _validate_string(value, schema, path, errors)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _validate_number(value, schema, path, errors)
    elif isinstance(value, list):
        _validate_array(value, schema, path, errors)
    elif isinstance(value, dict):
        _validate_object(value, schema, path, errors)


def _combinators(value: Any, schema: Schema, path: Path, errors: ErrorList) -> None:
    for sub in schema.get("allOf") or ():
        _validate(value, sub, path, errors)
    any_of = schema.get("anyOf")
    if any_of and not schema.get(INT_OR_STRING):
        outcomes = [_errors_of(value, sub, path) for sub in any_of]
        if all(outcomes):
            errors.extend(e for found in outcomes for e in found)
            errors.invalid(path, value, "must validate at least one schema (anyOf)")
    one_of = schema.get("oneOf")
    if one_of:
        outcomes = [_errors_of(value, sub, path) for sub in one_of]
        passed = sum(1 for found in outcomes if not found)
        if passed == 0:
            errors.extend(e for found in outcomes for e in found)
        if passed != 1:
            errors.invalid(path, value, "must validate one and only one schema (oneOf)")
    not_ = schema.get("not")
    if isinstance(not_, dict) and not _errors_of(value, not_, path):
        errors.invalid(path, value, "must not validate the schema (not)")


def _errors_of(value: Any, schema: Schema, path: Path) -> ErrorList:
    found = ErrorList()
    _validate(value, schema, path, found)
    return found


def _validate_string(value: str, schema: Schema, path: Path, errors: ErrorList) -> None:
    max_length = schema.get("maxLength")
    if max_length is not None and len(value) > max_length:
        errors.too_long(path, int(max_length))
    min_length = schema.get("minLength")
    if min_length is not None and len(value) < min_length:
        errors.invalid(path, value, f"{path} in body should be at least {min_length} chars long")
    pattern = schema.get("pattern")
    if pattern is not None and _compiled(pattern).search(value) is None:
        errors.invalid(path, value, f"{path} in body should match '{pattern}'")
    fmt = schema.get("format")
    check = _FORMATS.get(fmt) if isinstance(fmt, str) else None
    if check is not None and not check(value):
        detail = f"{path} in body must be of type {fmt}: {json.dumps(value)}"
        errors.append(FieldError(ErrorType.TYPE_INVALID, str(path), value, detail))


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _compiled(pattern: str) -> re.Pattern[str]:
    found = _PATTERNS.get(pattern)
    if found is None:
        try:
            found = re.compile(pattern)
        except re.error:
            found = re.compile(re.escape(pattern))
        _PATTERNS[pattern] = found
    return found


def _number_text(n: Any) -> str:
    if isinstance(n, float) and n.is_integer():
        return str(int(n))
    return str(n)


def _validate_number(value: float, schema: Schema, path: Path, errors: ErrorList) -> None:
    maximum = schema.get("maximum")
    if maximum is not None:
        if schema.get("exclusiveMaximum") and value >= maximum:
            errors.invalid(
                path, value, f"{path} in body should be less than {_number_text(maximum)}"
            )
        elif value > maximum:
            errors.invalid(
                path,
                value,
                f"{path} in body should be less than or equal to {_number_text(maximum)}",
            )
    minimum = schema.get("minimum")
    if minimum is not None:
        if schema.get("exclusiveMinimum") and value <= minimum:
            errors.invalid(
                path, value, f"{path} in body should be greater than {_number_text(minimum)}"
            )
        elif value < minimum:
            errors.invalid(
                path,
                value,
                f"{path} in body should be greater than or equal to {_number_text(minimum)}",
            )
    multiple = schema.get("multipleOf")
    if multiple:
        quotient = value / multiple
        if not math.isclose(quotient, round(quotient), rel_tol=0, abs_tol=1e-9):
            errors.invalid(
                path, value, f"{path} in body should be a multiple of {_number_text(multiple)}"
            )


def _validate_array(value: list[Any], schema: Schema, path: Path, errors: ErrorList) -> None:
    max_items = schema.get("maxItems")
    if max_items is not None and len(value) > max_items:
        errors.too_many(path, len(value), int(max_items))
    min_items = schema.get("minItems")
    if min_items is not None and len(value) < min_items:
        errors.invalid(path, len(value), f"{path} in body should have at least {min_items} items")
    if schema.get("uniqueItems") and len({json.dumps(v, sort_keys=True) for v in value}) < len(
        value
    ):
        errors.invalid(path, value, f"{path} in body shouldn't contain duplicates")
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            _validate(item, items, path.index(i), errors)
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "set":
        seen: set[str] = set()
        for i, item in enumerate(value):
            key = json.dumps(item, sort_keys=True)
            if key in seen:
                errors.duplicate(path.index(i), item)
            seen.add(key)
    elif list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen = set()
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            entry = {k: item.get(k) for k in keys}
            key = json.dumps(entry, sort_keys=True)
            if key in seen:
                errors.duplicate(path.index(i), entry)
            seen.add(key)


def _validate_object(value: dict[str, Any], schema: Schema, path: Path, errors: ErrorList) -> None:
    for name in schema.get("required") or ():
        if name not in value:
            errors.required(path.child(name))
    max_properties = schema.get("maxProperties")
    if max_properties is not None and len(value) > max_properties:
        errors.too_many(path, len(value), int(max_properties))
    min_properties = schema.get("minProperties")
    if min_properties is not None and len(value) < min_properties:
        errors.invalid(
            path,
            len(value),
            f"{path} in body should have at least {min_properties} properties",
        )
    properties: dict[str, Schema] = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    for key, item in value.items():
        sub = properties.get(key)
        if sub is None and isinstance(additional, dict):
            sub = additional
        if sub is not None:
            _validate(item, sub, path.child(str(key)), errors)
    if schema.get(EMBEDDED):
        for name in ("apiVersion", "kind"):
            if not value.get(name):
                errors.required(path.child(name), "must not be empty")


# Formats (upstream's strfmt registry, the ones CRDs use).

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?"
    r"(\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?)*$"
)
_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h|d|w))+$")
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_MAC = re.compile(r"^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}$")


def _date_time(text: str) -> bool:
    if not _DATE_TIME.match(text):
        return False
    try:
        datetime.datetime.fromisoformat(text.replace("z", "Z").replace("t", "T"))
    except ValueError:
        return False
    return True


def _date(text: str) -> bool:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return bool(re.match(r"^\d{4}-\d{2}-\d{2}$", text))


def _parses(parse: Callable[[str], object]) -> Callable[[str], bool]:
    def check(text: str) -> bool:
        try:
            parse(text)
        except ValueError:
            return False
        return True

    return check


def _byte(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except ValueError:
        return False
    return True


def _uuid(text: str) -> bool:
    return bool(re.match(r"^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$", text)) and (
        _parses(uuid.UUID)(text)
    )


_FORMATS: dict[str, Callable[[str], bool]] = {
    "date-time": _date_time,
    "date": _date,
    "uuid": _uuid,
    "uuid3": _uuid,
    "uuid4": _uuid,
    "uuid5": _uuid,
    "ipv4": _parses(ipaddress.IPv4Address),
    "ipv6": _parses(ipaddress.IPv6Address),
    "cidr": _parses(lambda t: ipaddress.ip_network(t, strict=False)),
    "mac": lambda t: bool(_MAC.match(t)),
    "email": lambda t: bool(_EMAIL.match(t)),
    "hostname": lambda t: bool(_HOSTNAME.match(t)),
    "byte": _byte,
    "duration": lambda t: bool(_DURATION.match(t)),
}
