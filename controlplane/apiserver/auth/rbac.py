"""The RBAC authorizer: Roles and ClusterRoles granted by RoleBindings and ClusterRoleBindings.

A request is allowed when some binding that applies to the user grants a role with a rule that
covers it, exactly as upstream's ``rbac.RuleAllows``:

- resource requests: the verb, the API group, the resource (``pods``, ``pods/log``, ``*`` or
  ``*/scale``) and, if the rule lists ``resourceNames``, the object's name (so a rule with
  names never covers ``list`` or ``create``);
- non-resource requests (cluster roles only): the verb and the path (``/healthz``, or a prefix
  ending in ``*`` such as ``/apis/*``).

ClusterRoleBindings apply everywhere; RoleBindings only in their namespace, granting a Role of
that namespace or a ClusterRole's rules there.  A ServiceAccount subject without a namespace
means the binding's namespace.  Bindings whose role does not exist grant nothing.

Everything is read from the server's watch caches (``Listing``), never from storage, so a
decision is a walk over in-memory objects; a binding created a moment ago takes effect once
the cache has seen it, as with upstream's informers.  The same walk answers
``SelfSubjectRulesReview``: the rules that apply to a user in a namespace.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from controlplane.apiserver.auth import User
from controlplane.apiserver.endpoints.requestinfo import RequestInfo
from kube.api.kinds.rbac_v1 import (
    ClusterRole,
    ClusterRoleBinding,
    PolicyRule,
    Role,
    RoleBinding,
    RoleBindingBase,
    Subject,
)
from kube.api.meta_v1 import Resource

ALL = "*"


class Listing(Protocol):
    """One kind's objects: a watch cache, or a fake in tests."""

    def get(self, namespace: str, name: str) -> Resource | None: ...

    def objects(self) -> list[Resource]: ...


def verb_matches(rule: PolicyRule, verb: str) -> bool:
    return any(v in (ALL, verb) for v in rule.verbs or ())


def resource_matches(rule: PolicyRule, resource: str, subresource: str) -> bool:
    combined = f"{resource}/{subresource}" if subresource else resource
    for allowed in rule.resources or ():
        if allowed in (ALL, combined):
            return True
        if subresource and allowed == f"{ALL}/{subresource}":
            return True
    return False


def non_resource_url_matches(rule: PolicyRule, path: str) -> bool:
    for allowed in rule.non_resource_urls or ():
        if allowed in (ALL, path):
            return True
        if allowed.endswith(ALL) and path.startswith(allowed[:-1]):
            return True
    return False


def rule_allows(rule: PolicyRule, info: RequestInfo) -> bool:
    """Whether one rule covers the request."""
    if not verb_matches(rule, info.verb):
        return False
    if not info.is_resource_request:
        return non_resource_url_matches(rule, info.path)
    if not any(g in (ALL, info.group) for g in rule.api_groups or ()):
        return False
    if not resource_matches(rule, info.resource, info.subresource):
        return False
    return not rule.resource_names or info.name in rule.resource_names


def subject_applies(subject: Subject, user: User, binding_namespace: str) -> bool:
    if subject.kind == "User":
        return subject.name == user.name
    if subject.kind == "Group":
        return subject.name in user.groups
    if subject.kind == "ServiceAccount":
        namespace = subject.namespace or binding_namespace
        return user.name == f"system:serviceaccount:{namespace}:{subject.name}"
    return False


class RBACAuthorizer:
    """Allows what the bindings that apply to the user grant; no opinion otherwise."""

    def __init__(
        self,
        roles: Listing,
        cluster_roles: Listing,
        role_bindings: Listing,
        cluster_role_bindings: Listing,
    ) -> None:
        self.roles = roles
        self.cluster_roles = cluster_roles
        self.role_bindings = role_bindings
        self.cluster_role_bindings = cluster_role_bindings

    def __call__(self, user: User, info: RequestInfo) -> bool:
        return any(rule_allows(rule, info) for rule in self._rules(user, info.namespace))

    def rules_for(self, user: User, namespace: str) -> tuple[list[PolicyRule], bool]:
        """The rules granted to ``user`` in ``namespace`` (cluster-wide ones included), once
        each; RBAC always knows them all, so never incomplete."""
        rules: list[PolicyRule] = []
        for rule in self._rules(user, namespace):
            if rule not in rules:
                rules.append(rule)
        return rules, False

    def _rules(self, user: User, namespace: str) -> Iterator[PolicyRule]:
        for binding in self.cluster_role_bindings.objects():
            assert isinstance(binding, ClusterRoleBinding)
            if self._applies(binding, user, ""):
                yield from self._role_rules(binding, "")
        if not namespace:
            return
        for binding in self.role_bindings.objects():
            assert isinstance(binding, RoleBinding)
            if binding.metadata.namespace == namespace and self._applies(binding, user, namespace):
                yield from self._role_rules(binding, namespace)

    @staticmethod
    def _applies(binding: RoleBindingBase, user: User, namespace: str) -> bool:
        return any(subject_applies(s, user, namespace) for s in binding.subjects or ())

    def _role_rules(self, binding: RoleBindingBase, namespace: str) -> list[PolicyRule]:
        ref = binding.role_ref
        if ref is None or not ref.name:
            return []
        if ref.kind == "ClusterRole":
            role = self.cluster_roles.get("", ref.name)
            return list(role.rules or ()) if isinstance(role, ClusterRole) else []
        if ref.kind == "Role" and namespace:
            found = self.roles.get(namespace, ref.name)
            return list(found.rules or ()) if isinstance(found, Role) else []
        return []


def covers(existing: Sequence[PolicyRule], wanted: PolicyRule) -> bool:
    """Whether ``existing`` allows everything ``wanted`` does (upstream ``validation.Covers``,
    rule by rule broken down into single verb/group/resource/name grants)."""
    for verb in wanted.verbs or ():
        for url in wanted.non_resource_urls or ():
            probe = RequestInfo(path=url, verb=verb)
            if not any(rule_allows(r, probe) for r in existing):
                return False
        for group in wanted.api_groups or ():
            for resource in wanted.resources or ():
                base, _, sub = resource.partition("/")
                for name in wanted.resource_names or ("",):
                    info = RequestInfo(
                        path="",
                        verb=verb,
                        is_resource_request=True,
                        group=group,
                        resource=base,
                        subresource=sub,
                        name=name,
                    )
                    if not any(rule_allows(r, info) for r in existing):
                        return False
    return True
