"""flowcontrol.apiserver.k8s.io/v1: FlowSchema and PriorityLevelConfiguration (API Priority and
Fairness).

A PriorityLevelConfiguration is a share of the API server's concurrency: ``Limited`` levels get
seats in proportion to their ``nominalConcurrencyShares`` and queue (or reject) what exceeds
them; the ``Exempt`` level is never limited.  A FlowSchema classifies requests: the schema with
the lowest ``matchingPrecedence`` (then the smallest name) whose rules match a request's user
and target sends it to its priority level, and its ``distinguisherMethod`` splits the level's
traffic into flows (by user, by namespace) that fair queuing keeps apart.  The API server
enforces them (``controlplane.apiserver.flowcontrol``) and keeps the FlowSchemas' ``Dangling``
condition.

Field names, order and protobuf numbers are k8s.io/api release-1.36's; defaults are those of
pkg/apis/flowcontrol/v1 (matchingPrecedence 1000, nominalConcurrencyShares 30 for a limited
level and 0 for the exempt one, lendablePercent 0, queues 64, handSize 8, queueLengthLimit 50),
validation follows pkg/apis/flowcontrol/validation with its messages, including its refusal
of a mandatory object (``exempt``, ``catch-all``) whose spec is not the fixed one
(``MANDATORY_SPECS``; the exempt level's ``spec.exempt`` may change).  The API server creates
them, and the rest of upstream's configuration, in ``controlplane.apiserver.flowcontrol``.
"""

from __future__ import annotations

import functools
import math
from typing import Annotated, Any

import msgspec

from kube.api import names, walk
from kube.api.errors import ErrorList, Path
from kube.api.meta_v1 import Resource
from kube.api.printing import AGE_COLUMN, NAME_COLUMN, Column
from kube.api.scheme import kind
from kube.api.struct import Struct, Time, atomic, meta

GROUP = "flowcontrol.apiserver.k8s.io"
EXEMPT = "exempt"
"""The name of the exempt priority level and of the FlowSchema that sends to it."""
CATCH_ALL = "catch-all"
NAME_ALL = "*"
"""In a rule or subject: every verb, group, resource, namespace, URL or service account."""
MAX_MATCHING_PRECEDENCE = 10000
MAX_QUEUES = 10_000_000
MAX_HASH_BITS = 60
"""Shuffle sharding deals hands from a 64-bit hash; upstream keeps 4 bits of margin."""
SUBJECT_KINDS = ("Group", "ServiceAccount", "User")
DISTINGUISHER_METHODS = ("ByNamespace", "ByUser")
LEVEL_TYPES = ("Exempt", "Limited")
LIMIT_RESPONSE_TYPES = ("Queue", "Reject")
VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "proxy", "update", "watch")
DANGLING = "Dangling"
"""The FlowSchema condition saying whether its priority level is missing."""
ALL_USERS = ("system:unauthenticated", "system:authenticated")
EVERYTHING: dict[str, Any] = {
    "resourceRules": [
        {
            "verbs": [NAME_ALL],
            "apiGroups": [NAME_ALL],
            "resources": [NAME_ALL],
            "clusterScope": True,
            "namespaces": [NAME_ALL],
        }
    ],
    "nonResourceRules": [{"verbs": [NAME_ALL], "nonResourceURLs": [NAME_ALL]}],
}
"""The rules of a PolicyRulesWithSubjects that match every request."""


def group_subjects(*groups: str) -> list[dict[str, Any]]:
    return [{"kind": "Group", "group": {"name": group}} for group in groups]


MANDATORY_SPECS: dict[tuple[str, str], dict[str, Any]] = {
    ("PriorityLevelConfiguration", EXEMPT): {
        "type": "Exempt",
        "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0},
    },
    ("PriorityLevelConfiguration", CATCH_ALL): {
        "type": "Limited",
        "limited": {
            "nominalConcurrencyShares": 5,
            "lendablePercent": 0,
            "limitResponse": {"type": "Reject"},
        },
    },
    ("FlowSchema", EXEMPT): {
        "priorityLevelConfiguration": {"name": EXEMPT},
        "matchingPrecedence": 1,
        "rules": [{"subjects": group_subjects("system:masters"), **EVERYTHING}],
    },
    ("FlowSchema", CATCH_ALL): {
        "priorityLevelConfiguration": {"name": CATCH_ALL},
        "matchingPrecedence": 10000,
        "distinguisherMethod": {"type": "ByUser"},
        "rules": [{"subjects": group_subjects(*ALL_USERS), **EVERYTHING}],
    },
}
"""The fixed specs of upstream's mandatory objects, by kind and name."""


def _fixed_spec(kind: str, name: str | None) -> Any:
    """The defaulted spec, as JSON values, a mandatory object must have (None: not one)."""
    if (kind, name or "") not in MANDATORY_SPECS:
        return None
    return _defaulted_fixed_spec(kind, name or "")


@functools.cache
def _defaulted_fixed_spec(kind: str, name: str) -> Any:
    raw = {"spec": MANDATORY_SPECS[kind, name]}
    obj: FlowSchema | PriorityLevelConfiguration = (
        msgspec.convert(raw, FlowSchema)
        if kind == "FlowSchema"
        else msgspec.convert(raw, PriorityLevelConfiguration)
    )
    walk.set_defaults(obj)
    return msgspec.to_builtins(obj.spec)


class FlowSchemaCondition(Struct):
    """One aspect of a FlowSchema's state (``Dangling``)."""

    type: Annotated[str | None, meta(doc="The condition's type.", proto=1)] = None
    status: Annotated[
        str | None, meta(doc="True, False or Unknown.", enum=("True", "False", "Unknown"), proto=2)
    ] = None
    last_transition_time: Annotated[
        Time | None, meta(doc="When the status last changed.", proto=3)
    ] = None
    reason: Annotated[str | None, meta(doc="Why, in CamelCase.", proto=4)] = None
    message: Annotated[str | None, meta(doc="Why, for people.", proto=5)] = None


class PriorityLevelConfigurationCondition(FlowSchemaCondition):
    """One aspect of a priority level's state (the same five fields as a FlowSchema's)."""


def _validate_conditions(
    conditions: list[FlowSchemaCondition] | list[PriorityLevelConfigurationCondition] | None,
    path: Path,
    errors: ErrorList,
) -> None:
    seen: set[str] = set()
    for i, condition in enumerate(conditions or ()):
        at = path.child("conditions").index(i)
        if condition.type in seen:
            errors.duplicate(at.child("type"), condition.type)
        seen.add(condition.type or "")
        if not condition.type:
            errors.required(at.child("type"), "must not be empty")


def _has_wildcard(values: list[str] | None) -> bool:
    return NAME_ALL in (values or ())


def _validate_verbs(verbs: list[str] | None, path: Path, errors: ErrorList) -> None:
    if not verbs:
        errors.required(path, "verbs must contain at least one value")
    elif _has_wildcard(verbs):
        if len(verbs) > 1:
            errors.invalid(path, verbs, "if '*' is present, must not specify other verbs")
    elif not set(verbs) <= set(VERBS):
        errors.not_supported(path, verbs, VERBS)


# FlowSchema.


class PriorityLevelConfigurationReference(Struct):
    """The priority level a FlowSchema sends its requests to."""

    name: Annotated[
        str | None, meta(doc="The PriorityLevelConfiguration's name.", proto=1, omitempty=True)
    ] = None


class FlowDistinguisherMethod(Struct):
    """How a FlowSchema's requests are split into flows."""

    type: Annotated[
        str | None,
        meta(
            required=True,
            doc="ByUser (a flow per user) or ByNamespace (a flow per namespace).",
            proto=1,
            omitempty=True,
        ),
    ] = None


class UserSubject(Struct):
    """A user, by name."""

    name: Annotated[
        str | None, meta(doc='The user\'s name, or "*" for every user.', proto=1, omitempty=True)
    ] = None


class GroupSubject(Struct):
    """A group of users, by name."""

    name: Annotated[
        str | None,
        meta(doc='The group\'s name (such as "system:authenticated").', proto=1, omitempty=True),
    ] = None


class ServiceAccountSubject(Struct):
    """A service account, by namespace and name."""

    namespace: Annotated[
        str | None, meta(doc="The service account's namespace.", proto=1, omitempty=True)
    ] = None
    name: Annotated[
        str | None,
        meta(
            doc="The service account's name, or \"*\" for all of the namespace's.",
            proto=2,
            omitempty=True,
        ),
    ] = None


class Subject(Struct):
    """Who makes a request: a user, a group or a service account (by ``kind``)."""

    kind: Annotated[
        str | None,
        meta(required=True, doc="User, Group or ServiceAccount.", proto=1, omitempty=True),
    ] = None
    user: Annotated[UserSubject | None, meta(doc="The user, for kind User.", proto=2)] = None
    group: Annotated[GroupSubject | None, meta(doc="The group, for kind Group.", proto=3)] = None
    service_account: Annotated[
        ServiceAccountSubject | None,
        meta(doc="The service account, for kind ServiceAccount.", proto=4),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        forbidden = {
            "user": "user is forbidden when subject kind is not 'User'",
            "group": "group is forbidden when subject kind is not 'Group'",
            "serviceAccount": "serviceAccount is forbidden when subject kind is not "
            "'ServiceAccount'",
        }
        present = {
            "user": self.user is not None,
            "group": self.group is not None,
            "serviceAccount": self.service_account is not None,
        }
        if self.kind == "ServiceAccount":
            own = "serviceAccount"
            self._validate_service_account(path.child(own), errors)
        elif self.kind == "User":
            own = "user"
            self._validate_named(self.user, own, "User", path, errors)
        elif self.kind == "Group":
            own = "group"
            self._validate_named(self.group, own, "Group", path, errors)
        else:
            if self.kind is not None:
                errors.not_supported(path.child("kind"), self.kind, SUBJECT_KINDS)
            return
        for other in ("serviceAccount", "user", "group"):
            if other != own and present[other]:
                errors.forbidden(path.child(other), forbidden[other])

    @staticmethod
    def _validate_named(
        subject: UserSubject | GroupSubject | None,
        field: str,
        kind: str,
        path: Path,
        errors: ErrorList,
    ) -> None:
        if subject is None:
            errors.required(path.child(field), f"{field} is required when subject kind is '{kind}'")
        elif not subject.name:
            errors.required(path.child(field).child("name"))

    def _validate_service_account(self, path: Path, errors: ErrorList) -> None:
        account = self.service_account
        if account is None:
            errors.required(
                path, "serviceAccount is required when subject kind is 'ServiceAccount'"
            )
            return
        if not account.name:
            errors.required(path.child("name"))
        elif account.name != NAME_ALL:
            errors.extend_checked(
                path.child("name"), account.name, names.is_dns1123_subdomain(account.name)
            )
        if account.namespace:
            errors.extend_checked(
                path.child("namespace"),
                account.namespace,
                names.is_dns1123_label(account.namespace),
            )
        else:
            errors.required(path.child("namespace"), "must specify namespace for service account")


class ResourcePolicyRule(Struct):
    """Requests for API resources: a verb, a group, a resource and a namespace (or none)."""

    verbs: Annotated[
        list[str] | None,
        meta(list_type="set", doc='Verbs matched ("*": all of them).', proto=1),
    ] = None
    api_groups: Annotated[
        list[str] | None,
        meta(list_type="set", doc='API groups matched ("" the core group, "*" all).', proto=2),
    ] = None
    resources: Annotated[
        list[str] | None,
        meta(
            list_type="set",
            doc='Resources matched, "resource" or "resource/subresource" ("*": all).',
            proto=3,
        ),
    ] = None
    cluster_scope: Annotated[
        bool | None,
        meta(doc="Whether requests without a namespace are matched.", proto=4, omitempty=True),
    ] = None
    namespaces: Annotated[
        list[str] | None,
        meta(list_type="set", doc='Namespaces matched ("*": every namespace).', proto=5),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_verbs(self.verbs, path.child("verbs"), errors)
        for field, values, what, message in (
            ("apiGroups", self.api_groups, "api groups", "at least one api group"),
            ("resources", self.resources, "resources", "at least one resource"),
        ):
            if not values:
                errors.required(path.child(field), f"resource rules must supply {message}")
            elif len(values) > 1 and _has_wildcard(values):
                errors.invalid(
                    path.child(field), values, f"if '*' is present, must not specify other {what}"
                )
        namespaces = self.namespaces or []
        if not namespaces and not self.cluster_scope:
            errors.required(
                path.child("namespaces"),
                "resource rules that are not cluster scoped must supply at least one namespace",
            )
        elif _has_wildcard(namespaces):
            if len(namespaces) > 1:
                errors.invalid(
                    path.child("namespaces"),
                    namespaces,
                    "if '*' is present, must not specify other namespaces",
                )
        else:
            for i, namespace in enumerate(namespaces):
                for problem in names.is_dns1123_label(namespace):
                    errors.invalid(
                        path.child("namespaces").index(i),
                        namespace,
                        "each member of this list must be '*' or a DNS-1123 label; " + problem,
                    )


class NonResourcePolicyRule(Struct):
    """Requests for non-resource URLs (``/healthz``, ``/metrics``...)."""

    verbs: Annotated[
        list[str] | None,
        meta(list_type="set", doc='Verbs matched ("*": all of them).', proto=1),
    ] = None
    non_resource_urls: Annotated[
        list[str] | None,
        meta(
            list_type="set",
            doc='URL paths matched; "/x/*" matches everything under /x, "*" every path.',
            proto=6,
        ),
    ] = msgspec.field(default=None, name="nonResourceURLs")

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_verbs(self.verbs, path.child("verbs"), errors)
        urls, urls_path = self.non_resource_urls or [], path.child("nonResourceURLs")
        if not urls:
            errors.required(urls_path, "nonResourceURLs must contain at least one value")
        elif _has_wildcard(urls):
            if len(urls) > 1:
                errors.invalid(
                    urls_path, urls, "if '*' is present, must not specify other non-resource URLs"
                )
        else:
            for i, url in enumerate(urls):
                problem = _non_resource_url_problem(url)
                if problem:
                    errors.invalid(urls_path.index(i), url, problem)


def _non_resource_url_problem(url: str) -> str:
    if not url:
        return "must not be empty"
    if url == "/":
        return ""
    if not url.startswith("/"):
        return "must start with slash"
    if " " in url:
        return "must not contain white-space"
    if "//" in url:
        return "must not contain double slash"
    stars = url.count("*")
    if stars > 1 or (stars == 1 and not url.endswith("/*")):
        return "wildcard can only do suffix matching"
    return ""


class PolicyRulesWithSubjects(Struct):
    """Who (any of ``subjects``) asks for what (any of the rules)."""

    subjects: Annotated[
        list[Subject] | None, atomic(doc="Who the rule is about; any one matches.", proto=1)
    ] = None
    resource_rules: Annotated[
        list[ResourcePolicyRule] | None,
        atomic(doc="Resource requests matched; any one matches.", proto=2),
    ] = None
    non_resource_rules: Annotated[
        list[NonResourcePolicyRule] | None,
        atomic(doc="Non-resource requests matched; any one matches.", proto=3),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if not self.subjects:
            errors.required(path.child("subjects"), "subjects must contain at least one value")
        if not self.resource_rules and not self.non_resource_rules:
            errors.required(
                path, "at least one of resourceRules and nonResourceRules has to be non-empty"
            )


class FlowSchemaSpec(Struct):
    """Which requests a FlowSchema matches and where it sends them."""

    priority_level_configuration: Annotated[
        PriorityLevelConfigurationReference | None,
        meta(doc="The priority level matched requests are sent to.", proto=1),
    ] = None
    matching_precedence: Annotated[
        int | None,
        meta(
            doc="Lower values are tried first; 1 to 10000, 1000 when unset.",
            proto=2,
            omitempty=True,
        ),
    ] = None
    distinguisher_method: Annotated[
        FlowDistinguisherMethod | None,
        meta(doc="How requests are split into flows; none: one flow.", proto=3),
    ] = None
    rules: Annotated[
        list[PolicyRulesWithSubjects] | None,
        atomic(doc="The requests matched: any rule matching is enough.", proto=4),
    ] = None

    def set_defaults(self) -> None:
        if not self.matching_precedence:
            self.matching_precedence = 1000
        if self.priority_level_configuration is None:
            self.priority_level_configuration = PriorityLevelConfigurationReference()

    def validate(self, path: Path, errors: ErrorList) -> None:
        precedence = self.matching_precedence or 0
        precedence_path = path.child("matchingPrecedence")
        if precedence <= 0:
            errors.invalid(precedence_path, precedence, "must be a positive value")
        if precedence > MAX_MATCHING_PRECEDENCE:
            errors.invalid(
                precedence_path,
                precedence,
                f"must not be greater than {MAX_MATCHING_PRECEDENCE}",
            )
        if self.distinguisher_method is not None and (
            self.distinguisher_method.type not in DISTINGUISHER_METHODS
        ):
            errors.not_supported(
                path.child("distinguisherMethod").child("type"),
                self.distinguisher_method.type,
                DISTINGUISHER_METHODS,
            )
        level = self.priority_level_configuration
        level_path = path.child("priorityLevelConfiguration").child("name")
        if level is not None and level.name:
            errors.extend_checked(level_path, level.name, names.is_dns1123_subdomain(level.name))
        else:
            errors.required(level_path, "must reference a priority level")


class FlowSchemaStatus(Struct):
    """The FlowSchema's conditions."""

    conditions: Annotated[
        list[FlowSchemaCondition] | None,
        meta(merge_key="type", doc="The current state (Dangling).", proto=1),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_conditions(self.conditions, path, errors)


def _distinguisher(fs: Any, now: Any) -> str:
    method = fs.spec.distinguisher_method if fs.spec else None
    return method.type if method is not None and method.type else "*"


def _missing_level(fs: Any, now: Any) -> str:
    for condition in (fs.status.conditions if fs.status else None) or ():
        if condition.type == DANGLING:
            return str(condition.status)
    return "?"


@kind(
    group=GROUP,
    version="v1",
    plural="flowschemas",
    namespaced=False,
    subresources=("status",),
    columns=(
        NAME_COLUMN,
        Column(
            "PriorityLevel",
            lambda o, now: o.spec.priority_level_configuration.name or "",
            description="The priority level that matched requests are sent to",
        ),
        Column(
            "MatchingPrecedence",
            lambda o, now: o.spec.matching_precedence or 0,
            type="string",
            description="Lower values win when several FlowSchemas match a request",
        ),
        Column(
            "DistinguisherMethod",
            _distinguisher,
            description="How matched requests are split into flows",
        ),
        AGE_COLUMN,
        Column(
            "MissingPL",
            _missing_level,
            description="Whether the referenced priority level is missing",
        ),
    ),
)
class FlowSchema(Resource):
    """A class of requests: who asks for what, and the priority level that serves them."""

    spec: Annotated[
        FlowSchemaSpec | None, meta(doc="The requests matched and their level.", proto=2)
    ] = None
    status: Annotated[
        FlowSchemaStatus | None, meta(doc="The FlowSchema's conditions.", proto=3)
    ] = None

    def set_defaults(self) -> None:
        if self.spec is None:
            self.spec = FlowSchemaSpec()

    def validate(self, path: Path, errors: ErrorList) -> None:
        name = self.metadata.name
        precedence = self.spec.matching_precedence if self.spec else None
        if precedence == 1 and name != EXEMPT:
            errors.invalid(
                path.child("spec").child("matchingPrecedence"),
                precedence,
                "only the schema named 'exempt' may have matchingPrecedence 1",
            )
        fixed, spec = _fixed_spec("FlowSchema", name), msgspec.to_builtins(self.spec)
        if fixed is not None and spec != fixed:
            errors.invalid(path.child("spec"), spec, f"spec of '{name}' must equal the fixed value")


# PriorityLevelConfiguration.


class QueuingConfiguration(Struct):
    """How a limited level queues the requests it cannot start at once."""

    queues: Annotated[
        int | None, meta(doc="The number of queues; 64 when unset.", proto=1, omitempty=True)
    ] = None
    hand_size: Annotated[
        int | None,
        meta(
            doc="The queues each flow is dealt (shuffle sharding); 8 when unset.",
            proto=2,
            omitempty=True,
        ),
    ] = None
    queue_length_limit: Annotated[
        int | None,
        meta(doc="Requests each queue holds at most; 50 when unset.", proto=3, omitempty=True),
    ] = None

    def set_defaults(self) -> None:
        self.queues = self.queues or 64
        self.hand_size = self.hand_size or 8
        self.queue_length_limit = self.queue_length_limit or 50

    def validate(self, path: Path, errors: ErrorList) -> None:
        queues, hand = self.queues or 0, self.hand_size or 0
        if (self.queue_length_limit or 0) <= 0:
            errors.invalid(
                path.child("queueLengthLimit"), self.queue_length_limit or 0, "must be positive"
            )
        if queues <= 0:
            errors.invalid(path.child("queues"), queues, "must be positive")
        elif queues > MAX_QUEUES:
            errors.invalid(path.child("queues"), queues, f"must not be greater than {MAX_QUEUES}")
        if hand <= 0:
            errors.invalid(path.child("handSize"), hand, "must be positive")
        elif hand > queues:
            errors.invalid(
                path.child("handSize"), hand, f"should not be greater than queues ({queues})"
            )
        elif required_entropy_bits(queues, hand) > MAX_HASH_BITS:
            errors.invalid(
                path.child("handSize"),
                hand,
                f"required entropy bits of deckSize {queues} and handSize {hand} should not be "
                f"greater than {MAX_HASH_BITS}",
            )


def required_entropy_bits(deck_size: int, hand_size: int) -> int:
    """The hash bits dealing ``hand_size`` cards of ``deck_size`` needs (upstream's formula)."""
    return math.ceil(math.log2(deck_size) * hand_size)


class LimitResponse(Struct):
    """What a limited level does with a request it cannot start at once."""

    type: Annotated[
        str | None,
        meta(required=True, doc="Queue or Reject.", proto=1, omitempty=True),
    ] = None
    queuing: Annotated[
        QueuingConfiguration | None, meta(doc="The queues, for type Queue.", proto=2)
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.type == "Reject":
            if self.queuing is not None:
                errors.forbidden(
                    path.child("queuing"),
                    "must be nil if limited.limitResponse.type is not Limited",
                )
        elif self.type == "Queue":
            if self.queuing is None:
                errors.required(
                    path.child("queuing"),
                    "must not be empty if limited.limitResponse.type is Limited",
                )
        elif self.type is not None:
            errors.not_supported(path.child("type"), self.type, LIMIT_RESPONSE_TYPES)


def _validate_shares(
    shares: int | None, lendable: int | None, path: Path, errors: ErrorList
) -> None:
    if shares is not None and shares < 0:
        errors.invalid(
            path.child("nominalConcurrencyShares"), shares, "must be a non-negative integer"
        )
    if lendable is not None and not 0 <= lendable <= 100:
        errors.invalid(
            path.child("lendablePercent"), lendable, "must be between 0 and 100, inclusive"
        )


class LimitedPriorityLevelConfiguration(Struct):
    """A level with a bounded share of the server's concurrency."""

    nominal_concurrency_shares: Annotated[
        int | None,
        meta(doc="The level's share of the server's concurrency limit; 30 when unset.", proto=1),
    ] = None
    limit_response: Annotated[
        LimitResponse | None,
        meta(doc="What happens to requests beyond the level's seats.", proto=2),
    ] = None
    lendable_percent: Annotated[
        int | None,
        meta(doc="The percentage of the level's seats other levels may borrow.", proto=3),
    ] = None
    borrowing_limit_percent: Annotated[
        int | None,
        meta(
            doc="How many seats, as a percentage of its own, the level may borrow; unset: no "
            "limit.",
            proto=4,
        ),
    ] = None

    def set_defaults(self) -> None:
        if self.nominal_concurrency_shares is None:
            self.nominal_concurrency_shares = 30
        if self.lendable_percent is None:
            self.lendable_percent = 0
        if self.limit_response is None:
            self.limit_response = LimitResponse()

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_shares(self.nominal_concurrency_shares, self.lendable_percent, path, errors)
        if self.borrowing_limit_percent is not None and self.borrowing_limit_percent < 0:
            errors.invalid(
                path.child("borrowingLimitPercent"),
                self.borrowing_limit_percent,
                "if specified, must be a non-negative integer",
            )


class ExemptPriorityLevelConfiguration(Struct):
    """The exempt level: never limited, but its shares still count in the division."""

    nominal_concurrency_shares: Annotated[
        int | None, meta(doc="The level's nominal share; 0 when unset.", proto=1)
    ] = None
    lendable_percent: Annotated[
        int | None,
        meta(doc="The percentage of the level's seats other levels may borrow.", proto=2),
    ] = None

    def set_defaults(self) -> None:
        if self.nominal_concurrency_shares is None:
            self.nominal_concurrency_shares = 0
        if self.lendable_percent is None:
            self.lendable_percent = 0

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_shares(self.nominal_concurrency_shares, self.lendable_percent, path, errors)


class PriorityLevelConfigurationSpec(Struct):
    """Whether the level is limited, and how."""

    type: Annotated[
        str | None,
        meta(required=True, doc="Exempt or Limited.", proto=1, omitempty=True),
    ] = None
    limited: Annotated[
        LimitedPriorityLevelConfiguration | None,
        meta(doc="The level's limits, for type Limited.", proto=2),
    ] = None
    exempt: Annotated[
        ExemptPriorityLevelConfiguration | None,
        meta(doc="The exempt level's shares, for type Exempt.", proto=3),
    ] = None


class PriorityLevelConfigurationStatus(Struct):
    """The level's conditions."""

    conditions: Annotated[
        list[PriorityLevelConfigurationCondition] | None,
        meta(merge_key="type", doc="The level's current state.", proto=1),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_conditions(self.conditions, path, errors)


def _limited_cell(field: str) -> Any:
    """A PriorityLevelConfiguration column showing a limited level's value, ``<none>`` else."""

    def cell(plc: Any, now: Any) -> Any:
        limited = plc.spec.limited if plc.spec else None
        if limited is None:
            return "<none>"
        if field == "nominalConcurrencyShares":
            return limited.nominal_concurrency_shares
        queuing = limited.limit_response.queuing if limited.limit_response else None
        if queuing is None:
            return "<none>"
        return {"queues": queuing.queues, "handSize": queuing.hand_size}.get(
            field, queuing.queue_length_limit
        )

    return cell


@kind(
    group=GROUP,
    version="v1",
    plural="prioritylevelconfigurations",
    namespaced=False,
    subresources=("status",),
    columns=(
        NAME_COLUMN,
        Column(
            "Type",
            lambda o, now: o.spec.type or "",
            description="Whether the level is exempt from limits or limited",
        ),
        Column(
            "NominalConcurrencyShares",
            _limited_cell("nominalConcurrencyShares"),
            description="The level's share of the server's concurrency limit",
        ),
        Column("Queues", _limited_cell("queues"), description="The number of queues"),
        Column("HandSize", _limited_cell("handSize"), description="The queues each flow is dealt"),
        Column(
            "QueueLengthLimit",
            _limited_cell("queueLengthLimit"),
            description="The requests each queue holds at most",
        ),
        AGE_COLUMN,
    ),
)
class PriorityLevelConfiguration(Resource):
    """A share of the API server's concurrency, and how requests beyond it wait."""

    spec: Annotated[
        PriorityLevelConfigurationSpec | None,
        meta(doc="Whether and how the level is limited.", proto=2),
    ] = None
    status: Annotated[
        PriorityLevelConfigurationStatus | None, meta(doc="The level's conditions.", proto=3)
    ] = None

    def set_defaults(self) -> None:
        if self.spec is None:
            self.spec = PriorityLevelConfigurationSpec()
        spec = self.spec
        if spec.type == "Exempt" and spec.exempt is None:
            spec.exempt = ExemptPriorityLevelConfiguration()

    def validate(self, path: Path, errors: ErrorList) -> None:
        spec = self.spec
        assert spec is not None
        spec_path = path.child("spec")
        if (self.metadata.name == EXEMPT) != (spec.type == "Exempt"):
            errors.invalid(
                spec_path.child("type"),
                spec.type,
                "type must be 'Exempt' if and only if name is 'exempt'",
            )
        if spec.type == "Exempt":
            if spec.limited is not None:
                errors.forbidden(
                    spec_path.child("limited"), "must be nil if the type is not Limited"
                )
        elif spec.type == "Limited":
            if spec.exempt is not None:
                errors.forbidden(spec_path.child("exempt"), "must be nil if the type is Limited")
            if spec.limited is None:
                errors.required(
                    spec_path.child("limited"), "must not be empty when type is Limited"
                )
        elif spec.type is not None:
            errors.not_supported(spec_path.child("type"), spec.type, LEVEL_TYPES)
        fixed, current = _fixed_spec(self.KIND, self.metadata.name), msgspec.to_builtins(spec)
        if fixed is None:
            return
        if self.metadata.name == EXEMPT:  # the exempt level's shares may change
            fixed, current = (
                {k: v for k, v in d.items() if k != "exempt"} for d in (fixed, current)
            )
            if current != fixed:
                errors.invalid(
                    spec_path,
                    msgspec.to_builtins(spec),
                    "spec of 'exempt' except the 'spec.exempt' field must equal the fixed value",
                )
        elif current != fixed:
            errors.invalid(
                spec_path, current, f"spec of '{self.metadata.name}' must equal the fixed value"
            )
