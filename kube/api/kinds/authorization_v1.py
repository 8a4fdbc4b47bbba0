"""authorization.k8s.io/v1: asking the authorizer whether someone may do something.

SubjectAccessReview asks about any user, LocalSubjectAccessReview about any user within one
namespace, SelfSubjectAccessReview about the caller (``kubectl auth can-i``), and
SelfSubjectRulesReview lists what the caller may do in a namespace (``kubectl auth can-i
--list``).  All four are only ever created, answered in their status, and never stored; their
metadata must stay empty.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from kube.api.errors import ROOT, ErrorList, Path
from kube.api.meta_v1 import LabelSelectorRequirement, ObjectMeta, Resource
from kube.api.scheme import CREATE_ONLY, kind
from kube.api.struct import Struct, atomic, meta

GROUP = "authorization.k8s.io"


class FieldSelectorRequirement(LabelSelectorRequirement):
    """One requirement of a field selector; operators this server does not know are allowed."""

    key: Annotated[str | None, meta(proto=1)] = None
    operator: Annotated[str | None, meta(proto=2)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if not self.key:
            errors.required(path.child("key"), "must be specified")
        super().validate(path, errors)


def _validate_selector_attributes(
    raw_selector: str | None, has_requirements: bool, path: Path, errors: ErrorList
) -> None:
    """A selector is given either as a raw string or as requirements, exactly one of them."""
    if raw_selector and has_requirements:
        errors.invalid(
            path.child("rawSelector"),
            raw_selector,
            "may not specified at the same time as requirements",
        )
    if not raw_selector and not has_requirements:
        errors.required(
            path.child("requirements"),
            f"when {path} is specified, requirements or rawSelector is required",
        )


class FieldSelectorAttributes(Struct):
    """The field selector of the request being checked (list and watch only)."""

    raw_selector: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    requirements: Annotated[list[FieldSelectorRequirement] | None, atomic(proto=2)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_selector_attributes(self.raw_selector, bool(self.requirements), path, errors)


class LabelSelectorAttributes(Struct):
    """The label selector of the request being checked (list and watch only)."""

    raw_selector: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    requirements: Annotated[list[LabelSelectorRequirement] | None, atomic(proto=2)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_selector_attributes(self.raw_selector, bool(self.requirements), path, errors)


class ResourceAttributes(Struct):
    """A request on a resource: verb, group, version, resource, subresource, namespace, name."""

    namespace: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    verb: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    group: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    version: Annotated[str | None, meta(proto=4, omitempty=True)] = None
    resource: Annotated[str | None, meta(proto=5, omitempty=True)] = None
    subresource: Annotated[str | None, meta(proto=6, omitempty=True)] = None
    name: Annotated[str | None, meta(proto=7, omitempty=True)] = None
    field_selector: Annotated[FieldSelectorAttributes | None, meta(proto=8)] = None
    label_selector: Annotated[LabelSelectorAttributes | None, meta(proto=9)] = None


class NonResourceAttributes(Struct):
    """A request on a URL path that is not a resource, such as ``GET /healthz``."""

    path: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    verb: Annotated[str | None, meta(proto=2, omitempty=True)] = None


_ATTRIBUTES_DOC = "Exactly one of resourceAttributes and nonResourceAttributes is required."


def _validate_attributes_choice(
    resource: ResourceAttributes | None,
    non_resource: NonResourceAttributes | None,
    path: Path,
    errors: ErrorList,
) -> None:
    if resource is not None and non_resource is not None:
        errors.invalid(
            path.child("nonResourceAttributes"),
            msgspec.to_builtins(non_resource),
            "cannot be specified in combination with resourceAttributes",
        )
    if resource is None and non_resource is None:
        errors.invalid(
            path.child("resourceAttributes"),
            None,
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )


class SelfSubjectAccessReviewSpec(Struct):
    """The request to check on behalf of the caller."""

    resource_attributes: Annotated[
        ResourceAttributes | None, meta(doc=_ATTRIBUTES_DOC, proto=1)
    ] = None
    non_resource_attributes: Annotated[
        NonResourceAttributes | None, meta(doc=_ATTRIBUTES_DOC, proto=2)
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_attributes_choice(
            self.resource_attributes, self.non_resource_attributes, path, errors
        )


class SubjectAccessReviewSpec(SelfSubjectAccessReviewSpec):
    """The request to check (the same fields, at the same protobuf numbers, as a
    SelfSubjectAccessReview's) and the user, groups and extra attributes making it."""

    user: Annotated[str | None, meta(proto=3, omitempty=True)] = None
    groups: Annotated[list[str] | None, atomic(proto=4)] = None
    extra: Annotated[dict[str, list[str]] | None, meta(proto=5)] = None
    uid: Annotated[str | None, meta(proto=6, omitempty=True)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        super().validate(path, errors)
        if not self.user and not self.groups:
            errors.invalid(
                path.child("user"),
                self.user or "",
                "at least one of user or group must be specified",
            )


class SubjectAccessReviewStatus(Struct):
    """The authorizer's answer: allowed, explicitly denied, and why."""

    allowed: Annotated[bool | None, meta(proto=1)] = None
    denied: Annotated[bool | None, meta(proto=4, omitempty=True)] = None
    reason: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    evaluation_error: Annotated[str | None, meta(proto=3, omitempty=True)] = None


def _metadata_must_be_empty(metadata: ObjectMeta, keep_namespace: bool, errors: ErrorList) -> None:
    """Reviews are never stored: their metadata stays empty (managedFields aside)."""
    rest = msgspec.structs.replace(
        metadata,
        managed_fields=None,
        namespace=None if keep_namespace else metadata.namespace,
    )
    if rest != ObjectMeta():
        detail = "must be empty except for namespace" if keep_namespace else "must be empty"
        errors.invalid(ROOT.child("metadata"), msgspec.to_builtins(metadata), detail)


@kind(group=GROUP, version="v1", plural="subjectaccessreviews", namespaced=False, verbs=CREATE_ONLY)
class SubjectAccessReview(Resource):
    """May this user (with these groups) do this? Answered in status."""

    spec: Annotated[
        SubjectAccessReviewSpec | None, meta(required=True, doc="The question.", proto=2)
    ] = None
    status: Annotated[SubjectAccessReviewStatus | None, meta(doc="The answer.", proto=3)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _metadata_must_be_empty(self.metadata, False, errors)


@kind(
    group=GROUP,
    version="v1",
    plural="selfsubjectaccessreviews",
    namespaced=False,
    verbs=CREATE_ONLY,
)
class SelfSubjectAccessReview(Resource):
    """May I do this? (``kubectl auth can-i``) Answered in status."""

    spec: Annotated[
        SelfSubjectAccessReviewSpec | None, meta(required=True, doc="The question.", proto=2)
    ] = None
    status: Annotated[SubjectAccessReviewStatus | None, meta(doc="The answer.", proto=3)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _metadata_must_be_empty(self.metadata, False, errors)


@kind(group=GROUP, version="v1", plural="localsubjectaccessreviews", verbs=CREATE_ONLY)
class LocalSubjectAccessReview(Resource):
    """May this user do this in this namespace? Answered in status."""

    spec: Annotated[
        SubjectAccessReviewSpec | None, meta(required=True, doc="The question.", proto=2)
    ] = None
    status: Annotated[SubjectAccessReviewStatus | None, meta(doc="The answer.", proto=3)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _metadata_must_be_empty(self.metadata, True, errors)
        if self.spec is None:
            return
        attributes = self.spec.resource_attributes
        if attributes is not None and (attributes.namespace or "") != (
            self.metadata.namespace or ""
        ):
            errors.invalid(
                path.child("spec").child("resourceAttributes").child("namespace"),
                attributes.namespace or "",
                "must match metadata.namespace",
            )
        if self.spec.non_resource_attributes is not None:
            errors.invalid(
                path.child("spec").child("nonResourceAttributes"),
                msgspec.to_builtins(self.spec.non_resource_attributes),
                "disallowed on this kind of request",
            )


class SelfSubjectRulesReviewSpec(Struct):
    """The namespace to list the caller's rules in."""

    namespace: Annotated[str | None, meta(proto=1, omitempty=True)] = None


class ResourceRule(Struct):
    """Verbs the caller may use on resources (a hint for UIs; not authoritative)."""

    verbs: Annotated[list[str] | None, atomic(proto=1)] = None
    api_groups: Annotated[list[str] | None, atomic(proto=2)] = None
    resources: Annotated[list[str] | None, atomic(proto=3)] = None
    resource_names: Annotated[list[str] | None, atomic(proto=4)] = None


class NonResourceRule(Struct):
    """Verbs the caller may use on non-resource URLs."""

    verbs: Annotated[list[str] | None, atomic(proto=1)] = None
    non_resource_urls: Annotated[list[str] | None, atomic(proto=2)] = msgspec.field(
        default=None, name="nonResourceURLs"
    )


class SubjectRulesReviewStatus(Struct):
    """The rules found, and whether the list is complete."""

    resource_rules: Annotated[list[ResourceRule] | None, atomic(proto=1)] = None
    non_resource_rules: Annotated[list[NonResourceRule] | None, atomic(proto=2)] = None
    incomplete: Annotated[bool | None, meta(proto=3)] = None
    evaluation_error: Annotated[str | None, meta(proto=4, omitempty=True)] = None


@kind(
    group=GROUP, version="v1", plural="selfsubjectrulesreviews", namespaced=False, verbs=CREATE_ONLY
)
class SelfSubjectRulesReview(Resource):
    """What may I do in this namespace? (``kubectl auth can-i --list``)"""

    spec: Annotated[
        SelfSubjectRulesReviewSpec | None, meta(doc="The namespace to ask about.", proto=2)
    ] = None
    status: Annotated[SubjectRulesReviewStatus | None, meta(doc="The rules found.", proto=3)] = None
