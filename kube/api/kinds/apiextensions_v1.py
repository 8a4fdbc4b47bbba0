"""apiextensions.k8s.io/v1: CustomResourceDefinition, which adds a resource to the API.

A CRD names a new kind (group, plural, singular, kind, short names, categories), its scope, and
one or more versions, each with an OpenAPI v3 schema (``JSONSchemaProps``, recursive), optional
``status``/``scale`` subresources and extra printer columns; exactly one version is stored.  The
schema checks here are the per-node rules upstream applies and the structural-schema basics
(every specified field typed, object at the root).  CEL rules (``x-kubernetes-validations``) are
compiled by the compiler the API server installs (``kube.api.expressions``); without one they
are kept as written.  Defaults in schemas are not checked against the schema.
"""

from __future__ import annotations

from typing import Annotated, Self

import msgspec

from kube.api import expressions, names
from kube.api.errors import ROOT, ErrorList, Path
from kube.api.expressions import Environment
from kube.api.kinds import admissionregistration_v1 as admission
from kube.api.meta_v1 import Resource
from kube.api.scheme import kind
from kube.api.struct import RawJSON, Struct, Time, atomic, meta

GROUP = "apiextensions.k8s.io"
SCOPES = ("Namespaced", "Cluster")
CONVERSION_STRATEGIES = ("None", "Webhook")
OPENAPI_TYPES = ("array", "boolean", "integer", "number", "object", "string")
PRINTER_COLUMN_TYPES = ("boolean", "date", "integer", "number", "string")
PRINTER_COLUMN_FORMATS = (
    "byte",
    "date",
    "date-time",
    "double",
    "float",
    "int32",
    "int64",
    "password",
)
VALIDATION_RULE_REASONS = (
    "FieldValueRequired",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueDuplicate",
)
# The fields of a root schema that survive extracting properties[status] for the status
# subresource, named as upstream names them in its message.
_ROOT_FIELDS_WITH_STATUS = {
    "description": "Description",
    "type": "Type",
    "format": "Format",
    "title": "Title",
    "maximum": "Maximum",
    "exclusiveMaximum": "ExclusiveMaximum",
    "minimum": "Minimum",
    "exclusiveMinimum": "ExclusiveMinimum",
    "maxLength": "MaxLength",
    "minLength": "MinLength",
    "pattern": "Pattern",
    "maxItems": "MaxItems",
    "minItems": "MinItems",
    "uniqueItems": "UniqueItems",
    "multipleOf": "MultipleOf",
    "required": "Required",
    "items": "Items",
    "properties": "Properties",
    "externalDocs": "ExternalDocs",
    "example": "Example",
    "x-kubernetes-preserve-unknown-fields": "XPreserveUnknownFields",
    "x-kubernetes-validations": "XValidations",
}


def _invalid_joined(path: Path, value: object, problems: list[str], errors: ErrorList) -> None:
    """One Invalid error with every message of a name check, comma-joined as upstream does."""
    if problems:
        errors.invalid(path, value, ",".join(problems))


def _has_newline(text: str) -> bool:
    return "\n" in text or "\r" in text


class ExternalDocumentation(Struct):
    """A link to more documentation about a schema."""

    description: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    url: Annotated[str | None, meta(proto=2, omitempty=True)] = None


class ValidationRule(Struct):
    """A CEL rule (``x-kubernetes-validations``) values of the schema must satisfy."""

    rule: Annotated[str | None, meta(proto=1)] = None
    message: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    message_expression: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    reason: Annotated[str | None, meta(enum=VALIDATION_RULE_REASONS, proto=4)] = None
    field_path: Annotated[str | None, meta(proto=5, omitempty=True)] = None
    optional_old_self: Annotated[bool | None, meta(proto=6)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        rule = (self.rule or "").strip()
        message = (self.message or "").strip()
        if not rule:
            errors.required(path.child("rule"), "rule is not specified")
        elif self.message and not message:
            errors.invalid(path.child("message"), self.message, "must be non-empty if specified")
        elif _has_newline(message):
            errors.invalid(path.child("message"), self.message, "must not contain line breaks")
        elif _has_newline(rule) and not message:
            errors.required(
                path.child("message"), "message must be specified if rule contains line breaks"
            )
        if self.message_expression and not self.message_expression.strip():
            errors.required(
                path.child("messageExpression"), "messageExpression must be non-empty if specified"
            )
        if self.field_path and not self.field_path.strip():
            errors.invalid(
                path.child("fieldPath"), self.field_path, "must be non-empty if specified"
            )
        if self.field_path and _has_newline(self.field_path):
            errors.invalid(path.child("fieldPath"), self.field_path, "must not contain line breaks")
        self._compile(rule, path, errors)

    def _compile(self, rule: str, path: Path, errors: ErrorList) -> None:
        """Upstream's compilation errors: ``rule: Invalid value: {...}: compilation failed: ...``
        (the value is the whole rule, as upstream reports it)."""
        message_expression = (self.message_expression or "").strip()
        problem = expressions.problem(Environment.CRD_RULE, rule)
        if problem is not None:
            errors.invalid(
                path.child("rule"), msgspec.to_builtins(self), f"compilation failed: {problem}"
            )
        problem = expressions.problem(Environment.CRD_RULE, message_expression)
        if problem is not None:
            errors.invalid(
                path.child("messageExpression"),
                msgspec.to_builtins(self),
                f"messageExpression compilation failed: {problem}",
            )


_FREE_FORM = meta(preserve_unknown=True)


class JSONSchemaProps(Struct):
    """An OpenAPI v3 schema (the subset Kubernetes accepts) with Kubernetes' extensions."""

    id: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    schema_: Annotated[str | None, meta(proto=2, omitempty=True)] = msgspec.field(
        default=None, name="$schema"
    )
    ref: Annotated[str | None, meta(proto=3)] = msgspec.field(default=None, name="$ref")
    description: Annotated[str | None, meta(proto=4, omitempty=True)] = None
    type: Annotated[str | None, meta(proto=5, omitempty=True)] = None
    format: Annotated[str | None, meta(proto=6, omitempty=True)] = None
    title: Annotated[str | None, meta(proto=7, omitempty=True)] = None
    default: Annotated[RawJSON, _FREE_FORM, meta(proto=8)] = None
    maximum: Annotated[int | float | None, meta(proto=9)] = None
    exclusive_maximum: Annotated[bool | None, meta(proto=10, omitempty=True)] = None
    minimum: Annotated[int | float | None, meta(proto=11)] = None
    exclusive_minimum: Annotated[bool | None, meta(proto=12, omitempty=True)] = None
    max_length: Annotated[int | None, meta(proto=13, int64=True)] = None
    min_length: Annotated[int | None, meta(proto=14, int64=True)] = None
    pattern: Annotated[str | None, meta(proto=15, omitempty=True)] = None
    max_items: Annotated[int | None, meta(proto=16, int64=True)] = None
    min_items: Annotated[int | None, meta(proto=17, int64=True)] = None
    unique_items: Annotated[bool | None, meta(proto=18, omitempty=True)] = None
    multiple_of: Annotated[int | float | None, meta(proto=19)] = None
    enum: Annotated[list[RawJSON] | None, atomic(preserve_unknown=True, proto=20)] = None
    max_properties: Annotated[int | None, meta(proto=21, int64=True)] = None
    min_properties: Annotated[int | None, meta(proto=22, int64=True)] = None
    required: Annotated[list[str] | None, atomic(proto=23)] = None
    items: Annotated[JSONSchemaProps | list[JSONSchemaProps] | None, meta(proto=24)] = None
    all_of: Annotated[list[JSONSchemaProps] | None, atomic(proto=25)] = None
    one_of: Annotated[list[JSONSchemaProps] | None, atomic(proto=26)] = None
    any_of: Annotated[list[JSONSchemaProps] | None, atomic(proto=27)] = None
    not_: Annotated[JSONSchemaProps | None, meta(proto=28)] = msgspec.field(
        default=None, name="not"
    )
    properties: Annotated[dict[str, JSONSchemaProps] | None, meta(proto=29)] = None
    additional_properties: Annotated[bool | JSONSchemaProps | None, meta(proto=30)] = None
    pattern_properties: Annotated[dict[str, JSONSchemaProps] | None, meta(proto=31)] = None
    dependencies: Annotated[
        dict[str, JSONSchemaProps | list[str]] | None,
        meta(proto=32),
    ] = None
    additional_items: Annotated[bool | JSONSchemaProps | None, meta(proto=33)] = None
    definitions: Annotated[dict[str, JSONSchemaProps] | None, meta(proto=34)] = None
    external_docs: Annotated[ExternalDocumentation | None, meta(proto=35)] = None
    example: Annotated[RawJSON, _FREE_FORM, meta(proto=36)] = None
    nullable: Annotated[bool | None, meta(proto=37, omitempty=True)] = None
    x_kubernetes_preserve_unknown_fields: Annotated[bool | None, meta(proto=38)] = msgspec.field(
        default=None, name="x-kubernetes-preserve-unknown-fields"
    )
    x_kubernetes_embedded_resource: Annotated[bool | None, meta(proto=39, omitempty=True)] = (
        msgspec.field(default=None, name="x-kubernetes-embedded-resource")
    )
    x_kubernetes_int_or_string: Annotated[bool | None, meta(proto=40, omitempty=True)] = (
        msgspec.field(default=None, name="x-kubernetes-int-or-string")
    )
    x_kubernetes_list_map_keys: Annotated[list[str] | None, atomic(proto=41)] = msgspec.field(
        default=None, name="x-kubernetes-list-map-keys"
    )
    x_kubernetes_list_type: Annotated[str | None, meta(proto=42)] = msgspec.field(
        default=None, name="x-kubernetes-list-type"
    )
    x_kubernetes_map_type: Annotated[str | None, meta(proto=43)] = msgspec.field(
        default=None, name="x-kubernetes-map-type"
    )
    x_kubernetes_validations: Annotated[
        list[ValidationRule] | None, meta(merge_key="rule", proto=44)
    ] = msgspec.field(default=None, name="x-kubernetes-validations")

    def validate(self, path: Path, errors: ErrorList) -> None:
        self._validate_keywords(path, errors)
        self._validate_extensions(path, errors)

    def _validate_keywords(self, path: Path, errors: ErrorList) -> None:
        """The OpenAPI keywords Kubernetes does not support, or supports only in part."""
        if self.type and self.type not in OPENAPI_TYPES:
            errors.not_supported(path.child("type"), self.type, OPENAPI_TYPES)
        if self.id:
            errors.forbidden(path.child("id"), "id is not supported")
        if self.additional_items is not None:
            errors.forbidden(path.child("additionalItems"), "additionalItems is not supported")
        if self.pattern_properties:
            errors.forbidden(path.child("patternProperties"), "patternProperties is not supported")
        if self.definitions:
            errors.forbidden(path.child("definitions"), "definitions is not supported")
        if self.dependencies is not None:
            errors.forbidden(path.child("dependencies"), "dependencies is not supported")
        if self.ref is not None:
            errors.forbidden(path.child("$ref"), "$ref is not supported")
        if self.type == "null":
            errors.forbidden(
                path.child("type"), "type cannot be set to null, use nullable as an alternative"
            )
        if isinstance(self.items, list):
            errors.forbidden(path.child("items"), "items must be a schema object and not an array")
        if self.unique_items:
            errors.forbidden(
                path.child("uniqueItems"),
                "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
            )
        if (
            self.properties
            and self.additional_properties is not None
            and (self.additional_properties is not True)
        ):
            errors.forbidden(
                path.child("additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            )

    def _validate_extensions(self, path: Path, errors: ErrorList) -> None:
        """The ``x-kubernetes-*`` extensions and how they fit the schema's type."""
        if self.x_kubernetes_preserve_unknown_fields is False:
            errors.invalid(
                path.child("x-kubernetes-preserve-unknown-fields"),
                False,
                "must be true or undefined",
            )
        map_type, list_type = self.x_kubernetes_map_type, self.x_kubernetes_list_type
        if map_type is not None:
            _require_type(self.type, "object", "x-kubernetes-map-type is specified", path, errors)
            if map_type not in ("atomic", "granular"):
                errors.not_supported(
                    path.child("x-kubernetes-map-type"), map_type, ("atomic", "granular")
                )
        if list_type is not None:
            _require_type(self.type, "array", "x-kubernetes-list-type is specified", path, errors)
            if list_type not in ("atomic", "set", "map"):
                errors.not_supported(
                    path.child("x-kubernetes-list-type"), list_type, ("atomic", "set", "map")
                )
        keys = self.x_kubernetes_list_map_keys
        if keys and list_type != "map":
            detail = "must be map if x-kubernetes-list-map-keys is non-empty"
            if list_type is None:
                errors.required(path.child("x-kubernetes-list-type"), detail)
            else:
                errors.invalid(path.child("x-kubernetes-list-type"), list_type, detail)
        if list_type == "map":
            self._validate_map_list(keys or [], path, errors)

    def _validate_map_list(self, keys: list[str], path: Path, errors: ErrorList) -> None:
        if not keys:
            errors.required(
                path.child("x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            )
        if self.items is None:
            errors.required(
                path.child("items"), "must have a schema if x-kubernetes-list-type is map"
            )
            return
        if isinstance(self.items, list):
            errors.invalid(
                path.child("items"),
                msgspec.to_builtins(self.items),
                "must only have a single schema if x-kubernetes-list-type is map",
            )
            return
        if self.items.type != "object":
            errors.invalid(
                path.child("items").child("type"),
                self.items.type or "",
                "must be object if parent array's x-kubernetes-list-type is map",
            )
            return
        properties = self.items.properties or {}
        seen: set[str] = set()
        for key in keys:
            if key not in properties:
                errors.invalid(
                    path.child("x-kubernetes-list-map-keys"),
                    keys,
                    "entries must all be names of item properties",
                )
            elif properties[key].type in ("array", "object"):
                errors.invalid(
                    path.child("items").child("properties").key(key).child("type"),
                    self.items.type,
                    "must be a scalar type if parent array's x-kubernetes-list-type is map",
                )
            if key in seen:
                errors.invalid(
                    path.child("x-kubernetes-list-map-keys"),
                    keys,
                    "must not contain duplicate entries",
                )
            seen.add(key)


def _require_type(
    actual: str | None, wanted: str, condition: str, path: Path, errors: ErrorList
) -> None:
    if actual == wanted:
        return
    detail = f"must be {wanted} if {condition}"
    if not actual:
        errors.required(path.child("type"), detail)
    else:
        errors.invalid(path.child("type"), actual, detail)


_LEVEL_MESSAGES = {
    "root": "must not be empty at the root",
    "item": "must not be empty for specified array items",
    "field": "must not be empty for specified object fields",
}


def _validate_structural(
    schema: JSONSchemaProps, level: str, path: Path, errors: ErrorList
) -> None:
    """Structural-schema basics along properties, items and additionalProperties."""
    if schema.type == "array" and schema.items is None:
        errors.required(path.child("items"), "must be specified")
    if isinstance(schema.items, JSONSchemaProps):
        _validate_structural(schema.items, "item", path.child("items"), errors)
    for name, prop in (schema.properties or {}).items():
        _validate_structural(prop, "field", path.child("properties").key(name), errors)
    additional = schema.additional_properties
    if additional is not None and not isinstance(additional, bool):
        if level == "root":
            errors.forbidden(path.child("additionalProperties"), "must not be used at the root")
        _validate_structural(additional, "field", path.child("additionalProperties"), errors)
    if schema.x_kubernetes_embedded_resource:
        _require_type(schema.type, "object", "x-kubernetes-embedded-resource is true", path, errors)
    elif not schema.type and not (
        schema.x_kubernetes_int_or_string or schema.x_kubernetes_preserve_unknown_fields
    ):
        errors.required(path.child("type"), _LEVEL_MESSAGES[level])
    if level == "root" and schema.type and schema.type != "object":
        errors.invalid(path.child("type"), schema.type, "must be object at the root")


class CustomResourceValidation(Struct):
    """The OpenAPI v3 schema objects of a version are validated and pruned against."""

    open_api_v3_schema: Annotated[JSONSchemaProps | None, meta(proto=1)] = msgspec.field(
        default=None, name="openAPIV3Schema"
    )

    def validate(self, path: Path, errors: ErrorList) -> None:
        schema = self.open_api_v3_schema
        if schema is None:
            return
        schema_path = path.child("openAPIV3Schema")
        if schema.nullable:
            errors.forbidden(schema_path.child("nullable"), "nullable cannot be true at the root")
        _validate_structural(schema, "root", schema_path, errors)


class CustomResourceSubresourceStatus(Struct):
    """Enables the status subresource: status is written only through ``/status``."""


class CustomResourceSubresourceScale(Struct):
    """Enables the scale subresource: where replicas and the label selector live."""

    spec_replicas_path: Annotated[str | None, meta(proto=1)] = None
    status_replicas_path: Annotated[str | None, meta(proto=2)] = None
    label_selector_path: Annotated[str | None, meta(proto=3)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_scale_path(
            self.spec_replicas_path, (".spec.",), path.child("specReplicasPath"), errors
        )
        _validate_scale_path(
            self.status_replicas_path, (".status.",), path.child("statusReplicasPath"), errors
        )
        if self.label_selector_path:
            _validate_scale_path(
                self.label_selector_path,
                (".spec.", ".status."),
                path.child("labelSelectorPath"),
                errors,
            )


def simple_json_path_problem(text: str) -> str | None:
    """Why ``text`` is not a simple JSON path in dot notation (None if it is)."""
    if not text:
        return "must not be empty"
    if not text.startswith("."):
        return "must be a simple json path starting with ."
    return None


def _validate_scale_path(
    value: str | None, prefixes: tuple[str, ...], field: Path, errors: ErrorList
) -> None:
    if not value:
        errors.required(field)
        return
    problem = simple_json_path_problem(value)
    if problem:
        errors.invalid(field, value, problem)
    elif not value.startswith(prefixes):
        under = " or ".join(p.rstrip(".") for p in prefixes)
        where = f"either {under}" if len(prefixes) > 1 else under
        errors.invalid(field, value, f"should be a json path under {where}")


class CustomResourceSubresources(Struct):
    """The status and scale subresources of a version."""

    status: Annotated[CustomResourceSubresourceStatus | None, meta(proto=1)] = None
    scale: Annotated[CustomResourceSubresourceScale | None, meta(proto=2)] = None


class CustomResourceColumnDefinition(Struct):
    """An extra column for ``kubectl get``: a name, a type and a JSON path into the object."""

    name: Annotated[str | None, meta(required=True, proto=1)] = None
    type: Annotated[str | None, meta(proto=2)] = None
    format: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    description: Annotated[str | None, meta(proto=4, omitempty=True)] = None
    priority: Annotated[int | None, meta(proto=5, omitempty=True)] = None
    json_path: Annotated[str | None, meta(proto=6)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        one_of_types = "must be one of " + ",".join(PRINTER_COLUMN_TYPES)
        if not self.type:
            errors.required(path.child("type"), one_of_types)
        elif self.type not in PRINTER_COLUMN_TYPES:
            errors.invalid(path.child("type"), self.type, one_of_types)
        if self.format and self.format not in PRINTER_COLUMN_FORMATS:
            errors.invalid(
                path.child("format"),
                self.format,
                "must be one of " + ",".join(PRINTER_COLUMN_FORMATS),
            )
        # Upstream reports this field by its Go name.
        if not self.json_path:
            errors.required(path.child("JSONPath"))
        else:
            problem = simple_json_path_problem(self.json_path)
            if problem:
                errors.invalid(path.child("JSONPath"), self.json_path, problem)


class SelectableField(Struct):
    """A field of the custom resource that field selectors may use."""

    json_path: Annotated[str | None, meta(required=True, proto=1)] = None


class CustomResourceDefinitionVersion(Struct):
    """One version of the resource: served or not, stored or not, its schema and extras."""

    name: Annotated[str | None, meta(proto=1)] = None
    served: Annotated[bool | None, meta(proto=2)] = None
    storage: Annotated[bool | None, meta(proto=3)] = None
    deprecated: Annotated[bool | None, meta(proto=7, omitempty=True)] = None
    deprecation_warning: Annotated[str | None, meta(proto=8)] = None
    schema: Annotated[CustomResourceValidation | None, meta(proto=4)] = None
    subresources: Annotated[CustomResourceSubresources | None, meta(proto=5)] = None
    additional_printer_columns: Annotated[
        list[CustomResourceColumnDefinition] | None, atomic(proto=6)
    ] = None
    selectable_fields: Annotated[list[SelectableField] | None, atomic(proto=9)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        name = self.name or ""
        _invalid_joined(path.child("name"), name, names.is_dns1035_label(name), errors)
        warning = self.deprecation_warning
        if warning is not None and not self.deprecated:
            errors.invalid(
                path.child("deprecationWarning"), warning, "can only be set for deprecated versions"
            )
        elif warning is not None:
            if len(warning) > 256:
                errors.invalid(
                    path.child("deprecationWarning"), warning, "must be <= 256 characters long"
                )
            if not warning:
                errors.invalid(
                    path.child("deprecationWarning"), warning, "must not be an empty string"
                )
        schema = self.schema.open_api_v3_schema if self.schema else None
        if schema is None:
            errors.required(path.child("schema").child("openAPIV3Schema"))
        elif self.subresources is not None and self.subresources.status is not None:
            _validate_root_with_status(
                schema, path.child("schema").child("openAPIV3Schema"), errors
            )


def _validate_root_with_status(schema: JSONSchemaProps, path: Path, errors: ErrorList) -> None:
    """With a status subresource, the root may only hold what survives extracting status."""
    given = {
        name: value
        for name, value in msgspec.to_builtins(schema).items()
        if value is not False and value not in ("", [], {})
    }
    if given.get("type", "object") != "object":
        errors.invalid(
            path.child("type"),
            given["type"],
            'only "object" is allowed as the type at the root of the schema if the status '
            "subresource is enabled",
        )
    elif any(name not in _ROOT_FIELDS_WITH_STATUS for name in given):
        allowed = " ".join(_ROOT_FIELDS_WITH_STATUS.values())
        errors.invalid(
            path,
            given,
            f"only [{allowed}] fields are allowed at the root of the schema if the status "
            "subresource is enabled",
        )


class CustomResourceDefinitionNames(Struct):
    """The names the resource is known by: plural, singular, kind, short names, categories."""

    plural: Annotated[str | None, meta(proto=1)] = None
    singular: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    short_names: Annotated[list[str] | None, atomic(proto=3)] = None
    kind: Annotated[str | None, meta(proto=4)] = None
    list_kind: Annotated[str | None, meta(proto=5, omitempty=True)] = None
    categories: Annotated[list[str] | None, atomic(proto=6)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        for name, value in (("plural", self.plural), ("singular", self.singular)):
            if value:
                _invalid_joined(path.child(name), value, names.is_dns1035_label(value), errors)
        for name, value in (("kind", self.kind), ("listKind", self.list_kind)):
            problems = names.is_dns1035_label(value.lower()) if value else []
            if problems:
                errors.invalid(
                    path.child(name),
                    value,
                    "may have mixed case, but should otherwise match: " + ",".join(problems),
                )
        for i, short_name in enumerate(self.short_names or ()):
            item = path.child("shortNames").index(i)
            _invalid_joined(item, short_name, names.is_dns1035_label(short_name), errors)
        if self.kind and self.kind == self.list_kind:
            errors.invalid(
                path.child("listKind"), self.list_kind, "kind and listKind may not be the same"
            )
        for i, category in enumerate(self.categories or ()):
            item = path.child("categories").index(i)
            _invalid_joined(item, category, names.is_dns1035_label(category), errors)


class ServiceReference(admission.ServiceReference):
    """The Service a conversion webhook is called through (port 443 unless given)."""


class WebhookClientConfig(admission.WebhookClientConfig):
    """How to reach a conversion webhook: exactly one of an https URL or a Service."""

    service: Annotated[ServiceReference | None, meta(proto=1)] = None


class WebhookConversion(Struct):
    """The conversion webhook and the ConversionReview versions it understands."""

    client_config: Annotated[WebhookClientConfig | None, meta(proto=2)] = None
    conversion_review_versions: Annotated[list[str] | None, atomic(proto=3)] = None


class CustomResourceConversion(Struct):
    """How objects are converted between versions: not at all (None) or by a webhook."""

    strategy: Annotated[str | None, meta(required=True, enum=CONVERSION_STRATEGIES, proto=1)] = None
    webhook: Annotated[WebhookConversion | None, meta(proto=2)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        # Upstream reports the webhook's fields by their internal names, one level up.
        client_config = self.webhook.client_config if self.webhook else None
        review_versions = self.webhook.conversion_review_versions if self.webhook else None
        if self.strategy == "Webhook":
            if client_config is None:
                errors.required(
                    path.child("webhookClientConfig"), "required when strategy is set to Webhook"
                )
            else:
                admission.validate_client_config(
                    client_config, path.child("webhookClientConfig"), errors
                )
            admission.validate_review_versions(
                review_versions, path.child("conversionReviewVersions"), errors, ""
            )
            return
        if client_config is not None:
            errors.forbidden(
                path.child("webhookClientConfig"),
                "should not be set when strategy is not set to Webhook",
            )
        if review_versions:
            errors.forbidden(
                path.child("conversionReviewVersions"),
                "should not be set when strategy is not set to Webhook",
            )


class CustomResourceDefinitionSpec(Struct):
    """The group, names, scope, versions and conversion of the new resource."""

    group: Annotated[
        str | None, meta(doc="The API group, a DNS subdomain with a dot.", proto=1)
    ] = None
    names: Annotated[CustomResourceDefinitionNames | None, meta(proto=3)] = None
    scope: Annotated[str | None, meta(required=True, enum=SCOPES, proto=4)] = None
    versions: Annotated[list[CustomResourceDefinitionVersion] | None, atomic(proto=7)] = None
    conversion: Annotated[CustomResourceConversion | None, meta(proto=9)] = None
    preserve_unknown_fields: Annotated[bool | None, meta(proto=10, omitempty=True)] = None

    def set_defaults(self) -> None:
        if self.names is not None and self.names.kind:
            if not self.names.singular:
                self.names.singular = self.names.kind.lower()
            if not self.names.list_kind:
                self.names.list_kind = self.names.kind + "List"
        if self.conversion is None:
            self.conversion = CustomResourceConversion(strategy="None")

    def validate(self, path: Path, errors: ErrorList) -> None:
        self._validate_group(path.child("group"), errors)
        self._validate_versions(path.child("versions"), errors)
        spec_names = self.names or CustomResourceDefinitionNames()
        for name, value in (
            ("plural", spec_names.plural),
            ("singular", spec_names.singular),
            ("kind", spec_names.kind),
            ("listKind", spec_names.list_kind),
        ):
            if not value:
                errors.required(path.child("names").child(name))
        if self.preserve_unknown_fields:
            errors.invalid(
                path.child("preserveUnknownFields"),
                True,
                "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in "
                "spec.versions[*].schema instead",
            )

    def _validate_group(self, path: Path, errors: ErrorList) -> None:
        if not self.group:
            errors.required(path)
            return
        problems = names.is_dns1123_subdomain(self.group)
        _invalid_joined(path, self.group, problems, errors)
        if not problems and "." not in self.group:
            errors.invalid(path, self.group, "should be a domain with at least one dot")

    def _validate_versions(self, path: Path, errors: ErrorList) -> None:
        versions = self.versions or []
        given = msgspec.to_builtins(versions)
        version_names = [v.name for v in versions]
        if len(set(version_names)) != len(version_names):
            errors.invalid(path, given, "must contain unique version names")
        if sum(1 for v in versions if v.storage) != 1:
            errors.invalid(path, given, "must have exactly one version marked as storage version")


class CustomResourceDefinitionCondition(Struct):
    """Established, NamesAccepted, NonStructuralSchema, Terminating, ..."""

    type: Annotated[str | None, meta(proto=1)] = None
    status: Annotated[str | None, meta(proto=2)] = None
    last_transition_time: Annotated[Time | None, meta(proto=3, omitempty=True)] = None
    reason: Annotated[str | None, meta(proto=4, omitempty=True)] = None
    message: Annotated[str | None, meta(proto=5, omitempty=True)] = None
    observed_generation: Annotated[int | None, meta(proto=6, int64=True, omitempty=True)] = None


class CustomResourceDefinitionStatus(Struct):
    """The names accepted, the conditions, and every version ever stored."""

    conditions: Annotated[
        list[CustomResourceDefinitionCondition] | None,
        meta(list_type="map", list_map_keys=("type",), proto=1),
    ] = None
    accepted_names: Annotated[CustomResourceDefinitionNames | None, meta(proto=2)] = None
    stored_versions: Annotated[list[str] | None, atomic(proto=3)] = None
    observed_generation: Annotated[int | None, meta(proto=4, int64=True, omitempty=True)] = None


@kind(
    group=GROUP,
    version="v1",
    plural="customresourcedefinitions",
    namespaced=False,
    short_names=("crd", "crds"),
    categories=("api-extensions",),
    subresources=("status",),
)
class CustomResourceDefinition(Resource):
    """A new resource served by the API server, named ``<plural>.<group>``."""

    spec: Annotated[
        CustomResourceDefinitionSpec | None,
        meta(required=True, doc="The resource to serve.", proto=2),
    ] = None
    status: Annotated[
        CustomResourceDefinitionStatus | None,
        meta(doc="Accepted names and stored versions.", proto=3),
    ] = None

    def set_defaults(self) -> None:
        if self.status is not None and self.status.stored_versions:
            return
        storage = next((v.name for v in self._versions() if v.storage), None)
        if storage is None:
            return
        if self.status is None:
            self.status = CustomResourceDefinitionStatus()
        self.status.stored_versions = [storage]

    def _versions(self) -> list[CustomResourceDefinitionVersion]:
        return (self.spec.versions if self.spec else None) or []

    def validate(self, path: Path, errors: ErrorList) -> None:
        spec = self.spec or CustomResourceDefinitionSpec()
        plural = spec.names.plural if spec.names else None
        required_name = f"{plural or ''}.{spec.group or ''}"
        if self.metadata.name and self.metadata.name != required_name:
            errors.invalid(
                path.child("metadata").child("name"),
                self.metadata.name,
                'must be spec.names.plural+"."+spec.group',
            )
        self._validate_stored_versions(path.child("status").child("storedVersions"), errors)

    def _validate_stored_versions(self, path: Path, errors: ErrorList) -> None:
        stored = (self.status.stored_versions if self.status else None) or []
        if not stored:
            errors.invalid(path, stored, "must have at least one stored version")
            return
        remaining = {name: i for i, name in enumerate(stored)}
        for version in self._versions():
            if version.storage and version.name not in remaining:
                errors.invalid(path, stored, f"must have the storage version {version.name}")
            remaining.pop(version.name or "", None)
        for name, i in remaining.items():
            errors.invalid(
                path.index(i),
                name,
                f"missing from spec.versions; {name} was previously a storage version, and must "
                f"remain in spec.versions until a storage migration ensures no data remains "
                f"persisted in {name} and removes {name} from status.storedVersions",
            )

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        new_spec = self.spec or CustomResourceDefinitionSpec()
        old_spec = old.spec or CustomResourceDefinitionSpec()
        spec_path = ROOT.child("spec")
        if new_spec.group != old_spec.group:
            errors.immutable(spec_path.child("group"), new_spec.group)
        new_plural = new_spec.names.plural if new_spec.names else None
        old_plural = old_spec.names.plural if old_spec.names else None
        if new_plural != old_plural:
            errors.immutable(spec_path.child("names").child("plural"), new_plural)
        if _established(old):
            if new_spec.scope != old_spec.scope:
                errors.immutable(spec_path.child("scope"), new_spec.scope)
            new_kind = new_spec.names.kind if new_spec.names else None
            old_kind = old_spec.names.kind if old_spec.names else None
            if new_kind != old_kind:
                errors.immutable(spec_path.child("names").child("kind"), new_kind)


def _established(crd: CustomResourceDefinition) -> bool:
    conditions = (crd.status.conditions if crd.status else None) or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)
