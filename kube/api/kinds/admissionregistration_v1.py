"""admissionregistration.k8s.io/v1: admission webhooks and admission policies.

A MutatingWebhookConfiguration or ValidatingWebhookConfiguration lists webhooks the API server
calls for matching requests: which operations on which resources, where the webhook lives (a
URL or an in-cluster Service), what to do when it fails and how long to wait.  A
ValidatingAdmissionPolicy states CEL validations in-process, and a
ValidatingAdmissionPolicyBinding applies one to a set of resources, optionally with parameters.
A MutatingAdmissionPolicy states CEL mutations (apply configurations or JSON patches) and a
MutatingAdmissionPolicyBinding applies one the same way; the two policy kinds share their
parameters, matching, variables and match conditions.

The webhook client configuration and its checks are shared with CRD conversion webhooks
(``apiextensions_v1``).  Every CEL expression is compiled when its object is written (by the
compiler the control plane installs, see ``kube.api.expressions``), as upstream: webhooks' and
policies' match conditions and variables, a ValidatingAdmissionPolicy's validations, their
messageExpressions and its auditAnnotations, and a MutatingAdmissionPolicy's mutations (whose
results are checked when applied, not yet when written).  What does not compile, names what
its field does not declare (``params`` without a paramKind, ``authorizer`` in a
messageExpression, ``variables`` in a policy without any) or does not evaluate to its field's
type is refused at the expression.  On update, an expression the old object had is compiled
as stored, and unchanged match conditions (and paramKind) are not compiled again, as upstream.
An update that leaves a policy's spec as it was (a status update, a label) compiles nothing:
its expressions were compiled when written.
"""

from __future__ import annotations

import datetime
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, ClassVar, Self

from kube.api import expressions, names
from kube.api.errors import ROOT, ErrorList, Path
from kube.api.expressions import Environment, Scope
from kube.api.meta_v1 import Condition, LabelSelector, Resource
from kube.api.printing import AGE_COLUMN, NAME_COLUMN, Column
from kube.api.scheme import kind
from kube.api.struct import QUALIFIED_NAME, Embedded, Struct, atomic, meta

GROUP = "admissionregistration.k8s.io"
CATEGORIES = ("api-extensions",)

FAILURE_POLICIES = ("Ignore", "Fail")
MATCH_POLICIES = ("Exact", "Equivalent")
NO_SIDE_EFFECTS = ("None", "NoneOnDryRun")
OPERATIONS = ("*", "CREATE", "UPDATE", "DELETE", "CONNECT")
SCOPES = ("Cluster", "Namespaced", "*")
REINVOCATION_POLICIES = ("Never", "IfNeeded")
VALIDATION_ACTIONS = ("Deny", "Warn", "Audit")
PARAMETER_NOT_FOUND_ACTIONS = ("Deny", "Allow")
VALIDATION_REASONS = ("Forbidden", "Invalid", "RequestEntityTooLarge")
PATCH_TYPES = ("ApplyConfiguration", "JSONPatch")
ACCEPTED_REVIEW_VERSIONS = ("v1", "v1beta1")
MAX_MATCH_CONDITIONS = 64


def _is_wildcard_mixed(values: list[str] | None) -> bool:
    """``*`` together with anything else, which the rules forbid."""
    return values is not None and len(values) > 1 and "*" in values


def _validate_resources(resources: list[str] | None, path: Path, errors: ErrorList) -> None:
    """Resources and ``resource/subresource`` patterns, with upstream's wildcard rules."""
    if not resources:
        errors.required(path)
        return
    with_wildcard_sub: set[str] = set()
    with_wildcard_resource: set[str] = set()
    double_wildcard = single_wildcard = plain_resource = False
    for i, entry in enumerate(resources):
        if not entry:
            errors.required(path.index(i))
            continue
        double_wildcard = double_wildcard or entry == "*/*"
        single_wildcard = single_wildcard or entry == "*"
        resource, slash, sub = entry.partition("/")
        if not slash:
            plain_resource = entry != "*"
            continue
        if resource in with_wildcard_sub:
            errors.invalid(
                path.index(i), entry, f"if '{resource}/*' is present, must not specify {entry}"
            )
        if sub in with_wildcard_resource:
            errors.invalid(
                path.index(i), entry, f"if '*/{sub}' is present, must not specify {entry}"
            )
        if sub == "*":
            with_wildcard_sub.add(resource)
        if resource == "*":
            with_wildcard_resource.add(sub)
    if len(resources) > 1 and double_wildcard:
        errors.invalid(path, resources, "if '*/*' is present, must not specify other resources")
    if single_wildcard and plain_resource:
        errors.invalid(
            path,
            resources,
            "if '*' is present, must not specify other resources without subresources",
        )


class RuleWithOperations(Struct, kw_only=True):
    """Operations on resources of API groups and versions that a webhook or policy matches.

    Upstream keeps the groups, versions, resources and scope in a ``Rule`` inlined here, and
    inlines this after the resource names of a ``NamedRuleWithOperations`` (keyword-only, so
    that it follows them on the wire: see kube.api.struct)."""

    PROTO_EMBEDDED: ClassVar[tuple[Embedded, ...]] = (
        Embedded(2, "Rule", ("api_groups", "api_versions", "resources", "scope")),
    )

    operations: Annotated[list[Annotated[str, meta(enum=OPERATIONS)]] | None, atomic(proto=1)] = (
        None
    )
    api_groups: Annotated[list[str] | None, atomic(proto=1)] = None
    api_versions: Annotated[list[str] | None, atomic(proto=2)] = None
    resources: Annotated[list[str] | None, atomic(proto=3)] = None
    scope: Annotated[str | None, meta(enum=SCOPES, proto=4)] = None

    def set_defaults(self) -> None:
        if self.scope is None:
            self.scope = "*"

    def validate(self, path: Path, errors: ErrorList) -> None:
        if not self.operations:
            errors.required(path.child("operations"))
        if _is_wildcard_mixed(self.operations):
            errors.invalid(
                path.child("operations"),
                self.operations,
                "if '*' is present, must not specify other operations",
            )
        if not self.api_groups:
            errors.required(path.child("apiGroups"))
        if _is_wildcard_mixed(self.api_groups):
            errors.invalid(
                path.child("apiGroups"),
                self.api_groups,
                "if '*' is present, must not specify other API groups",
            )
        if not self.api_versions:
            errors.required(path.child("apiVersions"))
        if _is_wildcard_mixed(self.api_versions):
            errors.invalid(
                path.child("apiVersions"),
                self.api_versions,
                "if '*' is present, must not specify other API versions",
            )
        for i, version in enumerate(self.api_versions or ()):
            if not version:
                errors.required(path.child("apiVersions").index(i))
        _validate_resources(self.resources, path.child("resources"), errors)


class ServiceReference(Struct):
    """An in-cluster Service a webhook is called through (port 443 unless given)."""

    namespace: Annotated[str | None, meta(required=True, proto=1)] = None
    name: Annotated[str | None, meta(required=True, proto=2)] = None
    path: Annotated[str | None, meta(proto=3)] = None
    port: Annotated[int | None, meta(proto=4)] = None

    def set_defaults(self) -> None:
        if self.port is None:
            self.port = 443


class WebhookClientConfig(Struct):
    """How to reach a webhook: exactly one of an https URL or a Service; the CA to trust."""

    url: Annotated[str | None, meta(proto=3)] = None
    service: Annotated[ServiceReference | None, meta(proto=1)] = None
    ca_bundle: Annotated[bytes | None, meta(proto=2)] = None


_URL_FORM = "; desired format: https://host[/path]"


def _validate_url(url: str, path: Path, errors: ErrorList) -> None:
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as error:
        errors.required(path, f"url must be a valid URL: {error}{_URL_FORM}")
        return
    user, at, host = parts.netloc.rpartition("@")
    if parts.scheme != "https":
        errors.invalid(path, parts.scheme, "'https' is the only allowed URL scheme" + _URL_FORM)
    if not host:
        errors.invalid(path, host, "host must be specified" + _URL_FORM)
    if at:
        errors.invalid(path, user, "user information is not permitted in the URL")
    if parts.fragment:
        errors.invalid(path, parts.fragment, "fragments are not permitted in the URL")
    if parts.query:
        errors.invalid(path, parts.query, "query parameters are not permitted in the URL")


def _validate_service(service: ServiceReference, path: Path, errors: ErrorList) -> None:
    # name and namespace are required by their declarations.
    port_problems = names.is_valid_port_num(service.port) if service.port is not None else []
    if port_problems:
        errors.invalid(
            path.child("port"), service.port, "port is not valid: " + ", ".join(port_problems)
        )
    url_path = service.path
    if url_path is None or url_path in ("", "/"):
        return
    if url_path == "//":
        errors.invalid(path.child("path"), url_path, "segment[0] may not be empty")
        return
    if not url_path.startswith("/"):
        errors.invalid(path.child("path"), url_path, "must start with a '/'")
    steps = url_path[1:]
    if steps.endswith("/"):
        steps = steps[:-1]
    for i, step in enumerate(steps.split("/")):
        if not step:
            errors.invalid(path.child("path"), url_path, f"segment[{i}] may not be empty")
            continue
        for problem in names.is_dns1123_subdomain(step):
            errors.invalid(path.child("path"), url_path, f"segment[{i}]: {problem}")


def validate_client_config(
    config: WebhookClientConfig | None, path: Path, errors: ErrorList
) -> None:
    """Exactly one of an https URL without user, query or fragment, or a Service with a path."""
    url = config.url if config is not None else None
    service = config.service if config is not None else None
    if (url is None) == (service is None):
        errors.required(path, "exactly one of url or service is required")
    elif url is not None:
        _validate_url(url, path.child("url"), errors)
    elif service is not None:
        _validate_service(service, path.child("service"), errors)


def validate_review_versions(
    versions: list[str] | None, path: Path, errors: ErrorList, required_detail: str
) -> None:
    """AdmissionReview or ConversionReview versions a webhook speaks: one the server knows."""
    if not versions:
        errors.required(path, required_detail)
        return
    seen: set[str] = set()
    for i, version in enumerate(versions):
        if version in seen:
            errors.invalid(path.index(i), version, "duplicate version")
            continue
        seen.add(version)
        for problem in names.is_dns1035_label(version):
            errors.invalid(path.index(i), version, problem)
    if not seen & set(ACCEPTED_REVIEW_VERSIONS):
        errors.invalid(
            path,
            versions,
            "must include at least one of " + ", ".join(ACCEPTED_REVIEW_VERSIONS),
        )


class MatchCondition(Struct):
    """A named CEL expression a request must satisfy to be sent to the webhook or policy."""

    name: Annotated[str | None, meta(required=True, format=QUALIFIED_NAME, proto=1)] = None
    expression: Annotated[str | None, meta(proto=2)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if not (self.expression or "").strip():
            errors.required(path.child("expression"))


MatchConditions = Annotated[list[MatchCondition] | None, meta(merge_key="name")]


def _validate_unique_names(item_names: Sequence[str | None], path: Path, errors: ErrorList) -> None:
    """Names of the items of a list that must differ (webhooks, match conditions)."""
    seen: set[str] = set()
    for i, name in enumerate(item_names):
        if name and name in seen:
            errors.duplicate(path.index(i).child("name"), name)
        seen.add(name or "")


def _validate_match_conditions(
    conditions: list[MatchCondition] | None, path: Path, errors: ErrorList
) -> None:
    if conditions and len(conditions) > MAX_MATCH_CONDITIONS:
        errors.too_many(path, len(conditions), MAX_MATCH_CONDITIONS)
    _validate_unique_names([c.name for c in conditions or ()], path, errors)


def _validate_fully_qualified_name(name: str | None, path: Path, errors: ErrorList) -> None:
    if not name:
        errors.required(path)
        return
    problems = names.is_dns1123_subdomain(name)
    if problems:
        errors.invalid(path, name, ",".join(problems))
    elif len(name.split(".")) < 3:
        errors.invalid(
            path, name, "should be a domain with at least three segments separated by dots"
        )


class WebhookBase(Struct):
    """What validating and mutating webhooks share: matching, calling and failing.

    Upstream declares the two webhooks apart, and their protobuf messages number
    ``objectSelector`` and ``matchConditions`` differently: each subclass numbers those two,
    and declares ``matchConditions`` itself since it comes last in each (after the mutating
    webhook's ``reinvocationPolicy``)."""

    name: Annotated[
        str | None, meta(doc="A fully qualified name, e.g. imagepolicy.example.com.", proto=1)
    ] = None
    client_config: Annotated[WebhookClientConfig | None, meta(proto=2)] = None
    rules: Annotated[list[RuleWithOperations] | None, atomic(proto=3)] = None
    failure_policy: Annotated[str | None, meta(enum=FAILURE_POLICIES, proto=4)] = None
    match_policy: Annotated[str | None, meta(enum=MATCH_POLICIES, proto=9)] = None
    namespace_selector: Annotated[LabelSelector | None, meta(proto=5)] = None
    object_selector: LabelSelector | None = None
    side_effects: Annotated[str | None, meta(enum=NO_SIDE_EFFECTS, proto=6)] = None
    timeout_seconds: Annotated[
        int | None, meta(doc="Seconds to wait, 1 to 30 (default 10).", proto=7)
    ] = None
    admission_review_versions: Annotated[list[str] | None, atomic(proto=8)] = None

    def set_defaults(self) -> None:
        if self.failure_policy is None:
            self.failure_policy = "Fail"
        if self.match_policy is None:
            self.match_policy = "Equivalent"
        if self.namespace_selector is None:
            self.namespace_selector = LabelSelector()
        if self.object_selector is None:
            self.object_selector = LabelSelector()
        if self.timeout_seconds is None:
            self.timeout_seconds = 10

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_fully_qualified_name(self.name, path.child("name"), errors)
        if not self.side_effects:
            errors.required(
                path.child("sideEffects"), "must specify one of " + ", ".join(NO_SIDE_EFFECTS)
            )
        if self.timeout_seconds is not None and not 1 <= self.timeout_seconds <= 30:
            errors.invalid(
                path.child("timeoutSeconds"),
                self.timeout_seconds,
                "the timeout value must be between 1 and 30 seconds",
            )
        validate_client_config(self.client_config, path.child("clientConfig"), errors)
        validate_review_versions(
            self.admission_review_versions,
            path.child("admissionReviewVersions"),
            errors,
            "must specify one of " + ", ".join(ACCEPTED_REVIEW_VERSIONS),
        )


BOOL = ("bool",)


@dataclass(frozen=True)
class Written:
    """The expressions of the object an update replaces, by field: those an update keeps are
    compiled as stored.  (As upstream, a variable counts as stored if a validation had its
    expression; in a MutatingAdmissionPolicy, a mutation.)"""

    match_conditions: frozenset[str] = frozenset()
    validations: frozenset[str] = frozenset()
    messages: frozenset[str] = frozenset()
    audit_annotations: frozenset[str] = frozenset()


def _compile(
    environment: Environment,
    text: str,
    scope: Scope,
    stored: frozenset[str],
    path: Path,
    errors: ErrorList,
    value: str | None = None,
) -> None:
    """Refuse ``text`` at ``path`` (showing ``value``, default ``text``) if it does not compile
    in ``environment`` and ``scope``."""
    problem = expressions.problem(environment, text, replace(scope, stored=text in stored))
    if problem is not None:
        errors.invalid(path, text if value is None else value, problem)


def _compile_match_conditions(
    conditions: Iterable[MatchCondition],
    environment: Environment,
    scope: Scope,
    stored: frozenset[str],
    path: Path,
    errors: ErrorList,
) -> None:
    """Match conditions, which must be bools (trimmed, as upstream compiles them)."""
    for i, condition in enumerate(conditions):
        expression = (condition.expression or "").strip()
        _compile(environment, expression, scope, stored, path.index(i).child("expression"), errors)


class ValidatingWebhook(WebhookBase):
    """A webhook that may reject matching requests but never changes them."""

    object_selector: Annotated[LabelSelector | None, meta(proto=10)] = None
    match_conditions: Annotated[MatchConditions, meta(proto=11)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        super().validate(path, errors)
        _validate_match_conditions(self.match_conditions, path.child("matchConditions"), errors)


class MutatingWebhook(WebhookBase):
    """A webhook that may change matching requests (with JSON patches) or reject them."""

    object_selector: Annotated[LabelSelector | None, meta(proto=11)] = None
    reinvocation_policy: Annotated[str | None, meta(enum=REINVOCATION_POLICIES, proto=10)] = None
    match_conditions: Annotated[MatchConditions, meta(proto=12)] = None

    def set_defaults(self) -> None:
        super().set_defaults()
        if self.reinvocation_policy is None:
            self.reinvocation_policy = "Never"

    def validate(self, path: Path, errors: ErrorList) -> None:
        super().validate(path, errors)
        _validate_match_conditions(self.match_conditions, path.child("matchConditions"), errors)


Webhook = ValidatingWebhook | MutatingWebhook


def _compile_webhooks(
    webhooks: Sequence[Webhook], old: Sequence[Webhook] | None, errors: ErrorList
) -> None:
    """Each webhook's match conditions, unless an update keeps every webhook's as they were."""
    if old is not None and [w.match_conditions for w in webhooks] == [
        w.match_conditions for w in old
    ]:
        return
    stored = frozenset(c.expression or "" for w in old or () for c in w.match_conditions or ())
    for i, webhook in enumerate(webhooks):
        path = ROOT.child("webhooks").index(i).child("matchConditions")
        conditions = webhook.match_conditions or ()
        scope = Scope(results=BOOL)
        _compile_match_conditions(
            conditions, Environment.MATCH_CONDITION, scope, stored, path, errors
        )


WEBHOOK_COLUMNS = (
    NAME_COLUMN,
    Column(
        "Webhooks",
        lambda o, now: len(o.webhooks or ()),
        type="integer",
        description="Webhooks indicates the number of webhooks registered in this configuration",
    ),
    AGE_COLUMN,
)


@kind(
    group=GROUP,
    version="v1",
    plural="validatingwebhookconfigurations",
    namespaced=False,
    categories=CATEGORIES,
    columns=WEBHOOK_COLUMNS,
)
class ValidatingWebhookConfiguration(Resource):
    """Webhooks called to accept or reject requests, after mutation."""

    webhooks: Annotated[
        list[ValidatingWebhook] | None,
        meta(merge_key="name", doc="The webhooks, by name.", proto=2),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_unique_names(
            [w.name for w in self.webhooks or ()], path.child("webhooks"), errors
        )

    def validate_create(self, errors: ErrorList) -> None:
        _compile_webhooks(self.webhooks or (), None, errors)

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        _compile_webhooks(self.webhooks or (), old.webhooks or [], errors)


@kind(
    group=GROUP,
    version="v1",
    plural="mutatingwebhookconfigurations",
    namespaced=False,
    categories=CATEGORIES,
    columns=WEBHOOK_COLUMNS,
)
class MutatingWebhookConfiguration(Resource):
    """Webhooks called, in order, to change or reject requests before validation."""

    webhooks: Annotated[
        list[MutatingWebhook] | None,
        meta(merge_key="name", doc="The webhooks, by name.", proto=2),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_unique_names(
            [w.name for w in self.webhooks or ()], path.child("webhooks"), errors
        )

    def validate_create(self, errors: ErrorList) -> None:
        _compile_webhooks(self.webhooks or (), None, errors)

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        _compile_webhooks(self.webhooks or (), old.webhooks or [], errors)


# ValidatingAdmissionPolicy and its binding.


class ParamKind(Struct):
    """The kind of the objects that parameterize a policy."""

    api_version: Annotated[str | None, meta(required=True, proto=1, omitempty=True)] = None
    kind: Annotated[str | None, meta(required=True, proto=2, omitempty=True)] = None


class NamedRuleWithOperations(RuleWithOperations):
    """A rule that may also be limited to objects of the given names.

    Upstream inlines a ``RuleWithOperations`` here, which inlines a ``Rule`` in turn."""

    PROTO_EMBEDDED = (
        Embedded(2, "RuleWithOperations", ("operations",)),
        Embedded(
            2,
            "Rule",
            ("api_groups", "api_versions", "resources", "scope"),
            within="RuleWithOperations",
        ),
    )

    resource_names: Annotated[list[str] | None, atomic(proto=1)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        seen: set[str] = set()
        for i, name in enumerate(self.resource_names or ()):
            item = path.child("resourceNames").index(i)
            errors.extend_checked(item, name, names.is_path_segment_name(name))
            if name in seen:
                errors.duplicate(item, name)
            seen.add(name)
        super().validate(path, errors)


class MatchResources(Struct):
    """Which requests a policy or binding applies to: by namespace, object and rules."""

    namespace_selector: Annotated[LabelSelector | None, meta(required=True, proto=1)] = None
    object_selector: Annotated[LabelSelector | None, meta(required=True, proto=2)] = None
    resource_rules: Annotated[list[NamedRuleWithOperations] | None, atomic(proto=3)] = None
    exclude_resource_rules: Annotated[list[NamedRuleWithOperations] | None, atomic(proto=4)] = None
    match_policy: Annotated[str | None, meta(required=True, enum=MATCH_POLICIES, proto=7)] = None

    def set_defaults(self) -> None:
        if self.match_policy is None:
            self.match_policy = "Equivalent"
        if self.namespace_selector is None:
            self.namespace_selector = LabelSelector()
        if self.object_selector is None:
            self.object_selector = LabelSelector()


class Validation(Struct):
    """A CEL expression every matching request must satisfy, and what to say when it does not."""

    expression: Annotated[str | None, meta(required=True, proto=1)] = None
    message: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    reason: Annotated[str | None, meta(enum=VALIDATION_REASONS, proto=3)] = None
    message_expression: Annotated[str | None, meta(proto=4, omitempty=True)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.message_expression and not self.message_expression.strip():
            errors.invalid(
                path.child("messageExpression"),
                self.message_expression,
                "must be non-empty if specified",
            )
        message = self.message or ""
        if message and not message.strip():
            errors.invalid(path.child("message"), message, "message must be non-empty if specified")
        elif "\n" in message.strip() or "\r" in message.strip():
            errors.invalid(path.child("message"), message, "message must not contain line breaks")


class Variable(Struct):
    """A named CEL expression the other expressions can use as ``variables.<name>``."""

    name: Annotated[str | None, meta(required=True, proto=1)] = None
    expression: Annotated[str | None, meta(required=True, proto=2)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.name and not _is_cel_identifier(self.name):
            errors.invalid(path.child("name"), self.name, "name is not a valid CEL identifier")


# fmt: off
CEL_RESERVED = frozenset({
    "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
    "function", "if", "import", "let", "loop", "package", "namespace", "return", "var", "void",
    "while",
})
# fmt: on


def _is_cel_identifier(name: str) -> bool:
    """CEL's IDENT: a letter or ``_``, then letters, digits and ``_``; not a reserved word."""
    return (
        name.isascii()
        and (name[0].isalpha() or name[0] == "_")
        and name.replace("_", "a").isalnum()
        and name not in CEL_RESERVED
    )


class AuditAnnotation(Struct):
    """An audit annotation whose value a CEL expression computes."""

    key: Annotated[str | None, meta(required=True, proto=1)] = None
    value_expression: Annotated[str | None, meta(required=True, proto=2)] = None


def _validate_policy_matching(
    constraints: MatchResources | None,
    conditions: list[MatchCondition] | None,
    path: Path,
    errors: ErrorList,
) -> None:
    """What both policy kinds require of their matching: resource rules (which give the
    expressions their types) and match conditions with unique names."""
    if constraints is not None and not constraints.resource_rules:
        errors.required(path.child("matchConstraints").child("resourceRules"))
    _validate_match_conditions(conditions, path.child("matchConditions"), errors)


def _written(spec: ValidatingAdmissionPolicySpec) -> Written:
    return Written(
        match_conditions=frozenset(c.expression or "" for c in spec.match_conditions or ()),
        validations=frozenset(v.expression or "" for v in spec.validations or ()),
        messages=frozenset(
            v.message_expression for v in spec.validations or () if v.message_expression
        ),
        audit_annotations=frozenset(a.value_expression or "" for a in spec.audit_annotations or ()),
    )


def _compile_policy(
    spec: ValidatingAdmissionPolicySpec | MutatingAdmissionPolicySpec,
    old: ValidatingAdmissionPolicySpec | MutatingAdmissionPolicySpec | None,
    written: Written,
    errors: ErrorList,
) -> tuple[tuple[str, str], ...] | None:
    """What both policy kinds compile alike (``old``: the spec an update replaces): their
    match conditions, which name no variables, and their variables, each seeing those before
    it; the variables their other expressions may read."""
    path = ROOT.child("spec")
    params = spec.param_kind is not None
    policy = Environment.POLICY
    if old is None or (spec.param_kind, spec.match_conditions) != (
        old.param_kind,
        old.match_conditions,
    ):
        conditions = spec.match_conditions or ()
        scope = Scope(params=params, results=BOOL)
        stored = written.match_conditions
        _compile_match_conditions(
            conditions, policy, scope, stored, path.child("matchConditions"), errors
        )
    declared = tuple((v.name or "", v.expression or "") for v in spec.variables or ())
    for i, (_, expression) in enumerate(declared):
        scope = Scope(params=params, variables=declared[:i])
        item = path.child("variables").index(i).child("expression")
        _compile(policy, expression, scope, written.validations, item, errors)
    return declared or None


def _compile_validating_policy(
    spec: ValidatingAdmissionPolicySpec,
    old: ValidatingAdmissionPolicySpec | None,
    errors: ErrorList,
) -> None:
    """Every expression of a ValidatingAdmissionPolicy, in the scope its field gives it."""
    path = ROOT.child("spec")
    written = _written(old) if old is not None else Written()
    variables = _compile_policy(spec, old, written, errors)
    params = spec.param_kind is not None
    policy = Environment.POLICY
    for i, validation in enumerate(spec.validations or ()):
        item = path.child("validations").index(i)
        scope = Scope(params=params, variables=variables, results=BOOL)
        expression = validation.expression or ""
        _compile(policy, expression, scope, written.validations, item.child("expression"), errors)
        message = validation.message_expression or ""
        scope = Scope(params=params, authorizer=False, variables=variables, results=("string",))
        _compile(policy, message, scope, written.messages, item.child("messageExpression"), errors)
    for i, annotation in enumerate(spec.audit_annotations or ()):
        item = path.child("auditAnnotations").index(i).child("valueExpression")
        scope = Scope(params=params, variables=variables, results=("string", "null_type"))
        value = annotation.value_expression or ""
        stored = written.audit_annotations
        _compile(policy, value.strip(), scope, stored, item, errors, value)


MatchConstraints = Annotated[
    MatchResources | None, meta(required=True, doc="The requests the policy applies to.")
]
PolicyFailurePolicy = Annotated[str | None, meta(required=True, enum=FAILURE_POLICIES)]
"""The fields both policy kinds declare alike."""


class ValidatingAdmissionPolicySpec(Struct):
    """The parameters, matching, validations and failure policy of a policy."""

    param_kind: Annotated[ParamKind | None, meta(proto=1)] = None
    match_constraints: Annotated[MatchConstraints, meta(proto=2)] = None
    validations: Annotated[list[Validation] | None, atomic(proto=3)] = None
    failure_policy: Annotated[PolicyFailurePolicy, meta(proto=4)] = None
    audit_annotations: Annotated[list[AuditAnnotation] | None, atomic(proto=5)] = None
    match_conditions: Annotated[MatchConditions, meta(proto=6)] = None
    variables: Annotated[list[Variable] | None, meta(merge_key="name", proto=7)] = None

    def set_defaults(self) -> None:
        if self.failure_policy is None:
            self.failure_policy = "Fail"

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_policy_matching(self.match_constraints, self.match_conditions, path, errors)
        if not self.validations and not self.audit_annotations:
            detail = "validations or auditAnnotations must contain at least one item"
            errors.required(path.child("validations"), detail)
            errors.required(path.child("auditAnnotations"), detail)


class ExpressionWarning(Struct):
    """A type-checking warning about one expression of a policy."""

    field_ref: Annotated[str | None, meta(proto=2)] = None
    warning: Annotated[str | None, meta(proto=3)] = None


class TypeChecking(Struct):
    """The results of type-checking a policy's expressions against its matched types."""

    expression_warnings: Annotated[list[ExpressionWarning] | None, atomic(proto=1)] = None


class ValidatingAdmissionPolicyStatus(Struct):
    """Type-checking results and conditions, written by the API server."""

    observed_generation: Annotated[int | None, meta(proto=1, int64=True, omitempty=True)] = None
    type_checking: Annotated[TypeChecking | None, meta(proto=2)] = None
    conditions: Annotated[
        list[Condition] | None, meta(list_type="map", list_map_keys=("type",), proto=3)
    ] = None


def _param_kind_cell(
    o: ValidatingAdmissionPolicy | MutatingAdmissionPolicy, now: datetime.datetime
) -> str:
    param_kind = o.spec.param_kind if o.spec else None
    if param_kind is None:
        return "<unset>"
    return f"{param_kind.api_version or ''}/{param_kind.kind or ''}"


PARAM_KIND_COLUMN = Column(
    "ParamKind",
    _param_kind_cell,
    description="ParamKind specifies the kind of resources used to parameterize this policy",
)


@kind(
    group=GROUP,
    version="v1",
    plural="validatingadmissionpolicies",
    namespaced=False,
    categories=CATEGORIES,
    subresources=("status",),
    columns=(
        NAME_COLUMN,
        Column(
            "Validations",
            lambda o, now: len((o.spec and o.spec.validations) or ()),
            type="integer",
            description="Validations indicates the number of validation rules defined in this "
            "configuration",
        ),
        PARAM_KIND_COLUMN,
        AGE_COLUMN,
    ),
)
class ValidatingAdmissionPolicy(Resource):
    """CEL validations the API server runs itself on the requests a binding matches."""

    spec: Annotated[
        ValidatingAdmissionPolicySpec | None, meta(required=True, doc="The policy.", proto=2)
    ] = None
    status: Annotated[
        ValidatingAdmissionPolicyStatus | None, meta(doc="Type checking and conditions.", proto=3)
    ] = None

    def validate_create(self, errors: ErrorList) -> None:
        if self.spec is not None:
            _compile_validating_policy(self.spec, None, errors)

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        if self.spec is not None and self.spec != old.spec:
            old_spec = old.spec or ValidatingAdmissionPolicySpec()
            _compile_validating_policy(self.spec, old_spec, errors)


class ParamRef(Struct):
    """The parameter object(s) a binding passes to its policy: by name or by selector."""

    name: Annotated[str | None, meta(proto=1, omitempty=True)] = None
    namespace: Annotated[str | None, meta(proto=2, omitempty=True)] = None
    selector: Annotated[LabelSelector | None, meta(proto=3)] = None
    parameter_not_found_action: Annotated[
        str | None, meta(required=True, enum=PARAMETER_NOT_FOUND_ACTIONS, proto=4)
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.name:
            errors.extend_checked(
                path.child("name"), self.name, names.is_path_segment_name(self.name)
            )
            if self.selector is not None:
                errors.forbidden(path.child("name"), "name and selector are mutually exclusive")
        if self.selector is not None and self.name:
            errors.forbidden(path.child("selector"), "name and selector are mutually exclusive")
        if not self.name and self.selector is None:
            errors.required(path, "one of name or selector must be specified")


def _validate_policy_name(name: str | None, path: Path, errors: ErrorList) -> None:
    if name:
        errors.extend_checked(path, name, names.is_dns1123_subdomain(name))


class ValidatingAdmissionPolicyBindingSpec(Struct):
    """The policy bound, its parameters, the resources matched and what a failure does."""

    policy_name: Annotated[str | None, meta(required=True, proto=1, omitempty=True)] = None
    param_ref: Annotated[ParamRef | None, meta(proto=2)] = None
    match_resources: Annotated[MatchResources | None, meta(proto=3)] = None
    validation_actions: Annotated[
        list[Annotated[str, meta(enum=VALIDATION_ACTIONS)]] | None,
        meta(list_type="set", proto=4),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_policy_name(self.policy_name, path.child("policyName"), errors)
        actions_path = path.child("validationActions")
        seen: set[str] = set()
        for i, action in enumerate(self.validation_actions or ()):
            if action in seen:
                errors.duplicate(actions_path.index(i), action)
            seen.add(action)
        if {"Deny", "Warn"} <= seen:
            errors.invalid(
                actions_path,
                self.validation_actions,
                "must not contain both Deny and Warn (repeating the same validation failure "
                "information in the API response and headers serves no purpose)",
            )
        if not seen:
            errors.required(actions_path, "at least one validation action is required")


def go_selector_string(selector: LabelSelector) -> str:
    """A label selector as Go's generated ``String()`` prints it (the ParamRef column)."""
    labels = "".join(f"{k}: {v}," for k, v in sorted((selector.match_labels or {}).items()))
    expressions = "".join(
        f"LabelSelectorRequirement{{Key:{r.key or ''},Operator:{r.operator or ''},"
        f"Values:[{' '.join(r.values or ())}],}},"
        for r in selector.match_expressions or ()
    )
    return (
        f"&LabelSelector{{MatchLabels:map[string]string{{{labels}}},"
        f"MatchExpressions:[]LabelSelectorRequirement{{{expressions}}},}}"
    )


def _param_ref_cell(
    o: ValidatingAdmissionPolicyBinding | MutatingAdmissionPolicyBinding, now: datetime.datetime
) -> str:
    ref = o.spec.param_ref if o.spec else None
    if ref is None:
        return "<unset>"
    if ref.name:
        return f"{ref.namespace}/{ref.name}" if ref.namespace else f"*/{ref.name}"
    if ref.selector is not None:
        return go_selector_string(ref.selector)
    return "<unset>"


BINDING_COLUMNS = (
    NAME_COLUMN,
    Column(
        "PolicyName",
        lambda o, now: (o.spec and o.spec.policy_name) or "",
        description="PolicyName indicates the policy definition which the policy binding binded to",
    ),
    Column(
        "ParamRef",
        _param_ref_cell,
        description="ParamRef indicates the param resource which sets the configration param",
    ),
    AGE_COLUMN,
)


@kind(
    group=GROUP,
    version="v1",
    plural="validatingadmissionpolicybindings",
    namespaced=False,
    categories=CATEGORIES,
    columns=BINDING_COLUMNS,
)
class ValidatingAdmissionPolicyBinding(Resource):
    """Applies a ValidatingAdmissionPolicy to matching requests, with parameters and actions."""

    spec: Annotated[
        ValidatingAdmissionPolicyBindingSpec | None,
        meta(required=True, doc="The binding.", proto=2),
    ] = None


# MutatingAdmissionPolicy and its binding.


class ApplyConfiguration(Struct):
    """A CEL expression that builds an apply configuration (``Object{spec: Object.spec{...}}``)
    merged into the object as server-side apply merges."""

    expression: Annotated[str | None, meta(proto=1, omitempty=True)] = None


class JSONPatch(Struct):
    """A CEL expression that returns RFC 6902 operations (``[JSONPatch{op: "add", ...}]``)."""

    expression: Annotated[str | None, meta(proto=1, omitempty=True)] = None


class Mutation(Struct):
    """One change a policy makes: an apply configuration or a JSON patch."""

    patch_type: Annotated[str | None, meta(required=True, enum=PATCH_TYPES, proto=2)] = None
    apply_configuration: Annotated[ApplyConfiguration | None, meta(proto=3)] = None
    json_patch: Annotated[JSONPatch | None, meta(proto=4)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        fields = {
            "ApplyConfiguration": ("applyConfiguration", self.apply_configuration),
            "JSONPatch": ("jsonPatch", self.json_patch),
        }
        if self.patch_type not in fields:
            return
        for name, value in fields.values():
            if name != fields[self.patch_type][0] and value is not None:
                errors.invalid(
                    path.child(name),
                    f"{{{name}}}",
                    f"must not be specified when patchType is {self.patch_type}",
                )
        name, chosen = fields[self.patch_type]
        if chosen is None:
            errors.required(
                path.child(name), f"must be specified when patchType is {self.patch_type}"
            )
        elif not (chosen.expression or "").strip():
            errors.required(path.child(name).child("expression"))


MUTATED_OPERATIONS = ("*", "CONNECT", "CREATE", "UPDATE")
"""The operations a mutating policy or binding may match: a DELETE has no object to change."""


def _validate_mutated_operations(
    match: MatchResources | None, path: Path, errors: ErrorList
) -> None:
    operations = path.child("resourceRules").child("operations")
    for rule in (match.resource_rules if match is not None else None) or ():
        for operation in rule.operations or ():
            if operation not in MUTATED_OPERATIONS:
                errors.not_supported(operations, operation, MUTATED_OPERATIONS)


class MutatingAdmissionPolicySpec(Struct):
    """The parameters, matching, variables, mutations and failure policy of a policy."""

    param_kind: Annotated[ParamKind | None, meta(proto=1)] = None
    match_constraints: Annotated[MatchConstraints, meta(proto=2)] = None
    variables: Annotated[list[Variable] | None, atomic(proto=3)] = None
    mutations: Annotated[list[Mutation] | None, atomic(proto=4)] = None
    failure_policy: Annotated[PolicyFailurePolicy, meta(proto=5)] = None
    match_conditions: Annotated[MatchConditions, meta(proto=6)] = None
    reinvocation_policy: Annotated[
        str | None, meta(required=True, enum=REINVOCATION_POLICIES, proto=7, omitempty=True)
    ] = None

    def set_defaults(self) -> None:
        if self.failure_policy is None:
            self.failure_policy = "Fail"

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_policy_matching(self.match_constraints, self.match_conditions, path, errors)
        _validate_mutated_operations(self.match_constraints, path.child("matchConstraints"), errors)
        if not self.mutations:
            errors.required(path.child("mutations"), "mutations must contain at least one item")


@kind(
    group=GROUP,
    version="v1",
    plural="mutatingadmissionpolicies",
    namespaced=False,
    categories=CATEGORIES,
    columns=(
        NAME_COLUMN,
        Column(
            "Mutations",
            lambda o, now: len((o.spec and o.spec.mutations) or ()),
            type="integer",
            description="Mutation indicates the number of mutations rules defined in this "
            "configuration",
        ),
        PARAM_KIND_COLUMN,
        AGE_COLUMN,
    ),
)
class MutatingAdmissionPolicy(Resource):
    """CEL mutations the API server applies itself to the requests a binding matches."""

    spec: Annotated[
        MutatingAdmissionPolicySpec | None, meta(required=True, doc="The policy.", proto=2)
    ] = None

    def validate_create(self, errors: ErrorList) -> None:
        if self.spec is not None:
            _compile_mutating_policy(self.spec, None, errors)

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        if self.spec is not None and self.spec != old.spec:
            old_spec = old.spec or MutatingAdmissionPolicySpec()
            _compile_mutating_policy(self.spec, old_spec, errors)


def _mutation_expressions(mutation: Mutation) -> list[tuple[str, str]]:
    """(field, expression) of the apply configuration and JSON patch a mutation has."""
    bodies = (
        ("applyConfiguration", mutation.apply_configuration),
        ("jsonPatch", mutation.json_patch),
    )
    return [(name, body.expression or "") for name, body in bodies if body is not None]


def _compile_mutating_policy(
    spec: MutatingAdmissionPolicySpec,
    old: MutatingAdmissionPolicySpec | None,
    errors: ErrorList,
) -> None:
    """Every expression of a MutatingAdmissionPolicy: its mutations name, besides a policy's
    variables, ``Object``, ``JSONPatch`` and ``jsonpatch``; their results are checked when
    they are applied."""
    written = Written()
    if old is not None:
        written = Written(
            match_conditions=frozenset(c.expression or "" for c in old.match_conditions or ()),
            validations=frozenset(
                e for m in old.mutations or () for _, e in _mutation_expressions(m)
            ),
        )
    variables = _compile_policy(spec, old, written, errors)
    scope = Scope(params=spec.param_kind is not None, variables=variables)
    for i, mutation in enumerate(spec.mutations or ()):
        item = ROOT.child("spec").child("mutations").index(i)
        for name, expression in _mutation_expressions(mutation):
            path = item.child(name).child("expression")
            _compile(Environment.MUTATION, expression, scope, written.validations, path, errors)


class MutatingAdmissionPolicyBindingSpec(Struct):
    """The policy bound, its parameters and the resources matched."""

    policy_name: Annotated[str | None, meta(required=True, proto=1, omitempty=True)] = None
    param_ref: Annotated[ParamRef | None, meta(proto=2)] = None
    match_resources: Annotated[MatchResources | None, meta(proto=3)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        _validate_policy_name(self.policy_name, path.child("policyName"), errors)
        _validate_mutated_operations(self.match_resources, path.child("matchResources"), errors)


@kind(
    group=GROUP,
    version="v1",
    plural="mutatingadmissionpolicybindings",
    namespaced=False,
    categories=CATEGORIES,
    columns=BINDING_COLUMNS,
)
class MutatingAdmissionPolicyBinding(Resource):
    """Applies a MutatingAdmissionPolicy to matching requests, with parameters."""

    spec: Annotated[
        MutatingAdmissionPolicyBindingSpec | None,
        meta(required=True, doc="The binding.", proto=2),
    ] = None
