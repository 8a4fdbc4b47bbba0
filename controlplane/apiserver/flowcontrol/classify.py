"""Which FlowSchema a request matches, and its flow within the schema's priority level.

Upstream's rules: schemas are tried by ``matchingPrecedence``, then name; a schema matches when
one of its rules matches both a subject (the user by name, a group the user is in, or a
service account, ``*`` matching any) and the request: a resource rule by verb, API group,
resource (``resource`` or ``resource/subresource``) and namespace (or ``clusterScope`` for a
request without one), a non-resource rule by verb and path (``/x/*`` matching below ``/x``).
The distinguisher names the flow: the user (``ByUser``), the namespace (``ByNamespace``), or
nothing (one flow for the schema).
"""

from __future__ import annotations

from collections.abc import Iterable

from controlplane.apiserver.auth import User
from controlplane.apiserver.endpoints.requestinfo import RequestInfo
from kube.api.kinds.flowcontrol_v1 import (
    NAME_ALL,
    FlowSchema,
    NonResourcePolicyRule,
    ResourcePolicyRule,
    Subject,
)

SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


def ordered(schemas: Iterable[FlowSchema]) -> list[FlowSchema]:
    """The schemas in the order they are tried."""
    return sorted(
        schemas,
        key=lambda fs: ((fs.spec.matching_precedence if fs.spec else 0) or 0, fs.metadata.name),
    )


def match(schemas: Iterable[FlowSchema], user: User, info: RequestInfo) -> FlowSchema | None:
    """The first of ``schemas`` (already ``ordered``) that matches the request."""
    for schema in schemas:
        if matches(schema, user, info):
            return schema
    return None


def matches(schema: FlowSchema, user: User, info: RequestInfo) -> bool:
    for rule in (schema.spec.rules if schema.spec else None) or ():
        if not any(_subject_matches(s, user) for s in rule.subjects or ()):
            continue
        if info.is_resource_request:
            if any(_resource_matches(r, info) for r in rule.resource_rules or ()):
                return True
        elif any(_non_resource_matches(r, info) for r in rule.non_resource_rules or ()):
            return True
    return False


def distinguisher(schema: FlowSchema, user: User, info: RequestInfo) -> str:
    method = schema.spec.distinguisher_method if schema.spec else None
    if method is None:
        return ""
    return user.name if method.type == "ByUser" else info.namespace


def _named(values: list[str] | None, value: str) -> bool:
    return NAME_ALL in (values or ()) or value in (values or ())


def _subject_matches(subject: Subject, user: User) -> bool:
    if subject.kind == "User" and subject.user is not None:
        return subject.user.name in (NAME_ALL, user.name)
    if subject.kind == "Group" and subject.group is not None:
        return subject.group.name == NAME_ALL or subject.group.name in user.groups
    if subject.kind == "ServiceAccount" and subject.service_account is not None:
        if not user.name.startswith(SERVICE_ACCOUNT_PREFIX):
            return False
        namespace, _, name = user.name.removeprefix(SERVICE_ACCOUNT_PREFIX).partition(":")
        account = subject.service_account
        return namespace == account.namespace and account.name in (NAME_ALL, name)
    return False


def _resource_matches(rule: ResourcePolicyRule, info: RequestInfo) -> bool:
    resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    if not (
        _named(rule.verbs, info.verb)
        and _named(rule.api_groups, info.group)
        and _named(rule.resources, resource)
    ):
        return False
    if not info.namespace:
        return bool(rule.cluster_scope)
    return _named(rule.namespaces, info.namespace)


def _non_resource_matches(rule: NonResourcePolicyRule, info: RequestInfo) -> bool:
    if not _named(rule.verbs, info.verb):
        return False
    for url in rule.non_resource_urls or ():
        if url in (NAME_ALL, info.path):
            return True
        if url.endswith("/*") and info.path.startswith(url[:-1]):
            return True
    return False
