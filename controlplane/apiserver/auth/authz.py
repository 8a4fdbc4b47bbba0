"""Authorization modes and their union (``--authorization-mode Node,RBAC``).

Upstream's order and semantics: members of ``system:masters`` are allowed everything before
any mode is asked (the privileged-group authorizer, so the admin identity can never lock
itself out); then each mode in the order given, the first that allows wins.  Modes:

- ``AlwaysAllow``: the behaviour before RBAC (authenticated users everything, anonymous ones
  the public paths), kept so existing setups keep working until they switch;
- ``AlwaysDeny``: nothing (tests and explicit lock-down);
- ``RBAC`` (``rbac``) and ``Node`` (``nodeauthz``), both evaluated from watch caches.

The same union answers ``SelfSubjectRulesReview``: each mode lists the rules it knows for the
user, and says whether that list is incomplete (the Node authorizer's depends on each object).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from controlplane.apiserver.auth import AUTHENTICATED, MASTERS, User, always_allow
from controlplane.apiserver.endpoints.requestinfo import RequestInfo
from kube.api.kinds.rbac_v1 import PolicyRule

MODES = ("AlwaysAllow", "AlwaysDeny", "Node", "RBAC")
EVERYTHING = [
    PolicyRule(verbs=["*"], api_groups=["*"], resources=["*"]),
    PolicyRule(verbs=["*"], non_resource_urls=["*"]),
]


class Mode(Protocol):
    """One authorization mode: a decision, and the rules behind it."""

    def __call__(self, user: User, info: RequestInfo) -> bool: ...

    def rules_for(self, user: User, namespace: str) -> tuple[list[PolicyRule], bool]: ...


class AlwaysAllow:
    def __call__(self, user: User, info: RequestInfo) -> bool:
        return always_allow(user, info)

    def rules_for(self, user: User, namespace: str) -> tuple[list[PolicyRule], bool]:
        return (list(EVERYTHING), False) if AUTHENTICATED in user.groups else ([], True)


class AlwaysDeny:
    def __call__(self, user: User, info: RequestInfo) -> bool:
        return False

    def rules_for(self, user: User, namespace: str) -> tuple[list[PolicyRule], bool]:
        return [], False


@dataclass
class Union:
    """The privileged group, then every mode in order; the first allow wins."""

    modes: Sequence[Mode]

    def __call__(self, user: User, info: RequestInfo) -> bool:
        return MASTERS in user.groups or any(mode(user, info) for mode in self.modes)

    def rules_for(self, user: User, namespace: str) -> tuple[list[PolicyRule], bool]:
        if MASTERS in user.groups:
            return list(EVERYTHING), False
        rules: list[PolicyRule] = []
        incomplete = False
        for mode in self.modes:
            found, partial = mode.rules_for(user, namespace)
            rules.extend(r for r in found if r not in rules)
            incomplete = incomplete or partial
        return rules, incomplete
