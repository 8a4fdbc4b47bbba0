"""batch/v1: Jobs, which run pods to completion, and CronJobs, which create Jobs on a schedule.

A Job's pods must not restart forever (``restartPolicy`` OnFailure or Never); its template and
most of its spec are fixed once it exists.  The API server generates a Job's selector and the
matching template labels before validation, so a Job may arrive here without a selector.  A
CronJob's schedule is a standard cron expression, read by ``kube.api.cron``, the same parser
the CronJob controller uses to compute its next run.
"""

from __future__ import annotations

import datetime
import re
from typing import Annotated, Self
from zoneinfo import ZoneInfo

import msgspec

from kube.api import names
from kube.api.cron import CronError, parse_cron
from kube.api.errors import ROOT, ErrorList, Path
from kube.api.kinds.apps_v1 import (
    CONDITION_STATUSES,
    selector_column,
    validate_template_selected,
)
from kube.api.kinds.core_v1.pod import PodTemplateSpec, template_columns
from kube.api.kinds.core_v1.volume import ObjectReference
from kube.api.meta_v1 import LabelSelector, ObjectMeta, Resource
from kube.api.printing import AGE_COLUMN, NAME_COLUMN, Column, age, human_duration
from kube.api.scheme import kind
from kube.api.struct import QUALIFIED_NAME, Struct, Time, atomic, meta

GROUP = "batch"

NON_INDEXED, INDEXED = "NonIndexed", "Indexed"
FAILED, TERMINATING_OR_FAILED = "Failed", "TerminatingOrFailed"

_MAX_PARALLELISM_INDEXED = 100_000
_MAX_FAILED_INDEXES = 100_000
_COMPLETIONS_SOFT_LIMIT = 100_000
_PARALLELISM_LIMIT_HIGH_COMPLETIONS = 10_000
_MAX_FAILED_INDEXES_HIGH_COMPLETIONS = 10_000
_MAX_POD_FAILURE_RULES = 20
_MAX_EXIT_CODES = 255
_MAX_POD_CONDITION_PATTERNS = 20
_MAX_MANAGED_BY_LENGTH = 63
_MAX_SUCCEEDED_INDEXES_LENGTH = 64 * 1024
_MAX_SUCCESS_RULES = 20
_MAX_CRONJOB_NAME = 52  # the controller appends "-<11 digits>" to make 63-character Job names

_ACTIONS = ("Count", "FailIndex", "FailJob", "Ignore")
_OPERATORS = ("In", "NotIn")
_STATUSES = tuple(sorted(CONDITION_STATUSES))


def _valid_values(values: tuple[str, ...]) -> str:
    """Upstream's ``valid values: ["a" "b"]`` detail of a missing enumerated field."""
    return "valid values: [" + " ".join(f'"{v}"' for v in values) + "]"


# Pod failure and success policies.


class PodFailurePolicyOnExitCodesRequirement(Struct):
    """Container exit codes a pod failure policy rule matches (``In`` or ``NotIn`` a set)."""

    container_name: Annotated[str | None, meta(proto=1)] = None
    operator: Annotated[str | None, meta(proto=2)] = None
    values: Annotated[list[int] | None, meta(list_type="set", proto=3)] = None


class PodFailurePolicyOnPodConditionsPattern(Struct):
    """A pod condition (type and status) a pod failure policy rule matches."""

    type: Annotated[str | None, meta(required=True, format=QUALIFIED_NAME, proto=1)] = None
    status: Annotated[str | None, meta(proto=2)] = None

    def set_defaults(self) -> None:
        if not self.status:
            self.status = "True"


class PodFailurePolicyRule(Struct):
    """What to do with a failed pod (fail the Job or index, ignore, count) when it matches."""

    action: Annotated[str | None, meta(proto=1)] = None
    on_exit_codes: Annotated[PodFailurePolicyOnExitCodesRequirement | None, meta(proto=2)] = None
    on_pod_conditions: Annotated[
        list[PodFailurePolicyOnPodConditionsPattern] | None, atomic(proto=3)
    ] = None


class PodFailurePolicy(Struct):
    """Rules, checked in order, deciding how a failed pod counts against the Job."""

    rules: Annotated[list[PodFailurePolicyRule] | None, atomic(proto=1)] = None


class SuccessPolicyRule(Struct):
    """Indexes that, or a count of indexes that, must succeed for the Job to succeed."""

    succeeded_indexes: Annotated[str | None, meta(proto=1)] = None
    succeeded_count: Annotated[int | None, meta(minimum=0, proto=2)] = None


class SuccessPolicy(Struct):
    """When an Indexed Job counts as succeeded before all its indexes complete."""

    rules: Annotated[list[SuccessPolicyRule] | None, atomic(proto=1)] = None


def parse_indexes(text: str, completions: int) -> int:
    """Check an index list (``"1,3-5,7"``) against ``completions``; return how many it names.

    Raise ValueError with upstream's message when the list is malformed, not increasing, or
    names an index at or above ``completions``.
    """
    if not text:
        return 0
    last: int | None = None
    total = 0
    for interval in text.split(","):
        limits = interval.split("-")
        if len(limits) > 2:
            raise ValueError(
                f'the fragment "{interval}" violates the requirement that an index interval '
                "can have at most two parts separated by '-'"
            )
        first = _index(limits[0], completions)
        if last is not None and last >= first:
            raise ValueError(f"non-increasing order, previous: {last}, current: {first}")
        total += 1
        last = first
        if len(limits) == 2:
            end = _index(limits[1], completions)
            if last >= end:
                raise ValueError(f"non-increasing order, previous: {last}, current: {end}")
            total += end - first
            last = end
    return total


def _index(text: str, completions: int) -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ValueError(f'cannot convert string to integer for index: "{text}"')
    value = int(text)
    if value >= completions:
        raise ValueError(f'too large index: "{text}"')
    return value


def _validate_pod_failure_policy(spec: JobSpec, path: Path, errors: ErrorList) -> None:
    policy = spec.pod_failure_policy
    if policy is None:
        return
    rules_path = path.child("rules")
    rules = policy.rules or []
    if len(rules) > _MAX_POD_FAILURE_RULES:
        errors.too_many(rules_path, len(rules), _MAX_POD_FAILURE_RULES)
    pod_spec = spec.template.spec if spec.template is not None else None
    containers = [
        *(pod_spec.containers or () if pod_spec else ()),
        *(pod_spec.init_containers or () if pod_spec else ()),
    ]
    container_names = {c.name for c in containers}
    for i, rule in enumerate(rules):
        rule_path = rules_path.index(i)
        action_path = rule_path.child("action")
        if not rule.action:
            errors.required(action_path, _valid_values(_ACTIONS))
        elif rule.action == "FailIndex":
            if spec.backoff_limit_per_index is None:
                errors.invalid(
                    action_path, rule.action, "requires the backoffLimitPerIndex to be set"
                )
        elif rule.action not in _ACTIONS:
            errors.not_supported(action_path, rule.action, _ACTIONS)
        if rule.on_exit_codes is not None:
            _validate_on_exit_codes(
                rule.on_exit_codes, rule_path.child("onExitCodes"), container_names, errors
            )
        if rule.on_pod_conditions:
            _validate_on_pod_conditions(
                rule.on_pod_conditions, rule_path.child("onPodConditions"), errors
            )
        if rule.on_exit_codes is not None and rule.on_pod_conditions:
            errors.invalid(
                rule_path, None, "specifying both OnExitCodes and OnPodConditions is not supported"
            )
        if rule.on_exit_codes is None and not rule.on_pod_conditions:
            errors.invalid(
                rule_path, None, "specifying one of OnExitCodes and OnPodConditions is required"
            )


def _validate_on_exit_codes(
    requirement: PodFailurePolicyOnExitCodesRequirement,
    path: Path,
    container_names: set[str | None],
    errors: ErrorList,
) -> None:
    operator_path = path.child("operator")
    if not requirement.operator:
        errors.required(operator_path, _valid_values(_OPERATORS))
    elif requirement.operator not in _OPERATORS:
        errors.not_supported(operator_path, requirement.operator, _OPERATORS)
    name = requirement.container_name
    if name is not None and name not in container_names:
        errors.invalid(
            path.child("containerName"),
            name,
            "must be one of the container or initContainer names in the pod template",
        )
    values_path = path.child("values")
    values = requirement.values or []
    if not values:
        errors.invalid(values_path, values, "at least one value is required")
    elif len(values) > _MAX_EXIT_CODES:
        errors.too_many(values_path, len(values), _MAX_EXIT_CODES)
    seen: set[int] = set()
    for j, value in enumerate(values):
        value_path = values_path.index(j)
        if requirement.operator == "In" and value == 0:
            errors.invalid(value_path, value, "must not be 0 for the In operator")
        if value in seen:
            errors.duplicate(value_path, value)
        seen.add(value)
    if values != sorted(values):
        errors.invalid(values_path, values, "must be ordered")


def _validate_on_pod_conditions(
    patterns: list[PodFailurePolicyOnPodConditionsPattern], path: Path, errors: ErrorList
) -> None:
    if len(patterns) > _MAX_POD_CONDITION_PATTERNS:
        errors.too_many(path, len(patterns), _MAX_POD_CONDITION_PATTERNS)
    for j, pattern in enumerate(patterns):
        status_path = path.index(j).child("status")
        if not pattern.status:
            errors.required(status_path, _valid_values(_STATUSES))
        elif pattern.status not in _STATUSES:
            errors.not_supported(status_path, pattern.status, _STATUSES)


def _validate_success_policy(spec: JobSpec, path: Path, errors: ErrorList) -> None:
    policy = spec.success_policy
    if policy is None:
        return
    if spec.completion_mode != INDEXED:
        errors.invalid(path, msgspec.to_builtins(policy), "requires indexed completion mode")
        return
    rules_path = path.child("rules")
    rules = policy.rules or []
    if not rules:
        errors.required(
            rules_path, "at least one rules must be specified when the successPolicy is specified"
        )
    if len(rules) > _MAX_SUCCESS_RULES:
        errors.too_many(rules_path, len(rules), _MAX_SUCCESS_RULES)
    completions = spec.completions
    for i, rule in enumerate(rules):
        rule_path = rules_path.index(i)
        if rule.succeeded_count is None and rule.succeeded_indexes is None:
            errors.required(
                rule_path, "at least one of succeededCount or succeededIndexes must be specified"
            )
        if completions is None:
            continue  # an Indexed Job without completions is reported on its own
        total = 0
        if rule.succeeded_indexes is not None:
            indexes_path = rule_path.child("succeededIndexes")
            if len(rule.succeeded_indexes) > _MAX_SUCCEEDED_INDEXES_LENGTH:
                errors.too_long(indexes_path, _MAX_SUCCEEDED_INDEXES_LENGTH)
            try:
                total = parse_indexes(rule.succeeded_indexes, completions)
            except ValueError as error:
                errors.invalid(
                    indexes_path,
                    rule.succeeded_indexes,
                    f"error parsing succeededIndexes: {error}",
                )
        count = rule.succeeded_count
        if count is not None:
            count_path = rule_path.child("succeededCount")
            if count > completions:
                errors.invalid(
                    count_path,
                    count,
                    f"must be less than or equal to {completions} "
                    "(the number of specified completions)",
                )
            if rule.succeeded_indexes is not None and count > total:
                errors.invalid(
                    count_path,
                    count,
                    f"must be less than or equal to {total} "
                    "(the number of indexes in the specified succeededIndexes field)",
                )


# Job.

_HTTP_PATH = re.compile(r"^[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$")


def _validate_managed_by(value: str, path: Path, errors: ErrorList) -> None:
    """A domain-prefixed path such as ``acme.io/foo``, at most 63 characters."""
    if not value:
        errors.required(path)
        return
    host, sep, rest = value.partition("/")
    if not sep or not host or not rest:
        errors.invalid(path, value, 'must be a domain-prefixed path (such as "acme.io/foo")')
    else:
        for problem in names.is_dns1123_subdomain(host):
            errors.invalid(path, host, problem)
        if not _HTTP_PATH.match(rest):
            errors.invalid(
                path,
                rest,
                "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')",
            )
    if len(value) > _MAX_MANAGED_BY_LENGTH:
        errors.too_long(path, _MAX_MANAGED_BY_LENGTH)


class JobSpec(Struct):
    """How many pods to run to completion, how many at once, and how failures count."""

    parallelism: Annotated[
        int | None, meta(minimum=0, doc="Maximum number of pods running at any time.", proto=1)
    ] = None
    completions: Annotated[
        int | None,
        meta(
            minimum=0,
            doc="Number of pods that must succeed; unset means any one suffices.",
            proto=2,
        ),
    ] = None
    active_deadline_seconds: Annotated[
        int | None,
        meta(
            minimum=0,
            doc="Seconds the Job may stay active before it is terminated.",
            proto=3,
            int64=True,
        ),
    ] = None
    pod_failure_policy: Annotated[
        PodFailurePolicy | None, meta(doc="Rules deciding how failed pods count.", proto=11)
    ] = None
    success_policy: Annotated[
        SuccessPolicy | None,
        meta(
            doc="When an Indexed Job counts as succeeded before all its indexes complete.", proto=16
        ),
    ] = None
    backoff_limit: Annotated[
        int | None, meta(minimum=0, doc="Retries before the Job is failed. Defaults to 6.", proto=7)
    ] = None
    backoff_limit_per_index: Annotated[
        int | None, meta(minimum=0, doc="Retries per index before the index is failed.", proto=12)
    ] = None
    max_failed_indexes: Annotated[
        int | None,
        meta(minimum=0, doc="Failed indexes tolerated before the whole Job is failed.", proto=13),
    ] = None
    selector: Annotated[
        LabelSelector | None,
        meta(doc="Label query over the Job's pods; normally generated by the system.", proto=4),
    ] = None
    manual_selector: Annotated[
        bool | None, meta(doc="Whether the selector is chosen by the user, not generated.", proto=5)
    ] = None
    template: Annotated[
        PodTemplateSpec | None,
        meta(
            required=True, doc="The pods the Job runs (restartPolicy OnFailure or Never).", proto=6
        ),
    ] = None
    ttl_seconds_after_finished: Annotated[
        int | None,
        meta(minimum=0, doc="Seconds after the Job finishes before it is deleted.", proto=8),
    ] = None
    completion_mode: Annotated[
        str | None,
        meta(enum=(NON_INDEXED, INDEXED), doc="NonIndexed (the default) or Indexed.", proto=9),
    ] = None
    suspend: Annotated[
        bool | None, meta(doc="Whether the controller should stop creating pods.", proto=10)
    ] = None
    pod_replacement_policy: Annotated[
        str | None,
        meta(doc="When replacement pods are created: TerminatingOrFailed or Failed.", proto=14),
    ] = None
    managed_by: Annotated[
        str | None,
        meta(doc="The controller that manages the Job, if not the built-in one.", proto=15),
    ] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        if self.max_failed_indexes is not None and self.backoff_limit_per_index is None:
            errors.required(
                path.child("backoffLimitPerIndex"), "when maxFailedIndexes is specified"
            )
        if self.managed_by is not None:
            _validate_managed_by(self.managed_by, path.child("managedBy"), errors)
        if self.completion_mode == INDEXED:
            self._validate_indexed(path, errors)
        elif self.completion_mode in (None, NON_INDEXED):
            for attr, name in (
                ("backoff_limit_per_index", "backoffLimitPerIndex"),
                ("max_failed_indexes", "maxFailedIndexes"),
            ):
                value = getattr(self, attr)
                if value is not None:
                    errors.invalid(path.child(name), value, "requires indexed completion mode")
        _validate_pod_failure_policy(self, path.child("podFailurePolicy"), errors)
        _validate_success_policy(self, path.child("successPolicy"), errors)
        self._validate_pod_replacement_policy(path.child("podReplacementPolicy"), errors)
        self._validate_restart_policy(
            path.child("template").child("spec").child("restartPolicy"), errors
        )

    def _validate_indexed(self, path: Path, errors: ErrorList) -> None:
        completions, parallelism = self.completions, self.parallelism
        max_failed = self.max_failed_indexes
        if completions is None:
            errors.required(path.child("completions"), f"when completion mode is {INDEXED}")
        if parallelism is not None and parallelism > _MAX_PARALLELISM_INDEXED:
            errors.invalid(
                path.child("parallelism"),
                parallelism,
                f"must be less than or equal to {_MAX_PARALLELISM_INDEXED} "
                f"when completion mode is {INDEXED}",
            )
        if completions is not None and max_failed is not None and max_failed > completions:
            errors.invalid(
                path.child("maxFailedIndexes"),
                max_failed,
                "must be less than or equal to completions",
            )
        if max_failed is not None and max_failed > _MAX_FAILED_INDEXES:
            errors.invalid(
                path.child("maxFailedIndexes"),
                max_failed,
                f"must be less than or equal to {_MAX_FAILED_INDEXES}",
            )
        high = completions is not None and completions > _COMPLETIONS_SOFT_LIMIT
        if not high or self.backoff_limit_per_index is None:
            return
        suffix = (
            f"when completions are above {_COMPLETIONS_SOFT_LIMIT} "
            "and used with backoff limit per index"
        )
        if max_failed is None:
            errors.required(
                path.child("maxFailedIndexes"),
                f"must be specified when completions is above {_COMPLETIONS_SOFT_LIMIT}",
            )
        if parallelism is not None and parallelism > _PARALLELISM_LIMIT_HIGH_COMPLETIONS:
            errors.invalid(
                path.child("parallelism"),
                parallelism,
                f"must be less than or equal to {_PARALLELISM_LIMIT_HIGH_COMPLETIONS} {suffix}",
            )
        if max_failed is not None and max_failed > _MAX_FAILED_INDEXES_HIGH_COMPLETIONS:
            errors.invalid(
                path.child("maxFailedIndexes"),
                max_failed,
                f"must be less than or equal to {_MAX_FAILED_INDEXES_HIGH_COMPLETIONS} {suffix}",
            )

    def _validate_pod_replacement_policy(self, path: Path, errors: ErrorList) -> None:
        policy = self.pod_replacement_policy
        if policy is None:
            return
        if self.pod_failure_policy is not None:
            if policy != FAILED:
                errors.not_supported(path, policy, (FAILED,))
        elif policy not in (FAILED, TERMINATING_OR_FAILED):
            errors.not_supported(path, policy, (FAILED, TERMINATING_OR_FAILED))

    def _validate_restart_policy(self, path: Path, errors: ErrorList) -> None:
        pod_spec = self.template.spec if self.template is not None else None
        restart_policy = (pod_spec.restart_policy if pod_spec is not None else None) or ""
        if restart_policy in ("Always", ""):
            errors.required(path, 'valid values: "OnFailure", "Never"')
        elif restart_policy not in ("OnFailure", "Never"):
            errors.not_supported(path, restart_policy, ("OnFailure", "Never"))
        elif self.pod_failure_policy is not None and restart_policy != "Never":
            errors.invalid(
                path, restart_policy, 'only "Never" is supported when podFailurePolicy is specified'
            )


class JobCondition(Struct):
    """One aspect of a Job's state: Complete, Failed, Suspended, FailureTarget, ..."""

    type: Annotated[str | None, meta(required=True, proto=1)] = None
    status: Annotated[str | None, meta(required=True, enum=CONDITION_STATUSES, proto=2)] = None
    last_probe_time: Annotated[Time | None, meta(proto=3)] = None
    last_transition_time: Annotated[Time | None, meta(proto=4)] = None
    reason: Annotated[str | None, meta(proto=5, omitempty=True)] = None
    message: Annotated[str | None, meta(proto=6, omitempty=True)] = None


class UncountedTerminatedPods(Struct):
    """UIDs of finished pods the controller has not yet added to the status counters."""

    succeeded: Annotated[list[str] | None, meta(list_type="set", proto=1)] = None
    failed: Annotated[list[str] | None, meta(list_type="set", proto=2)] = None


class JobStatus(Struct):
    """What the Job controller last observed: pods active, succeeded and failed, and when."""

    conditions: Annotated[
        list[JobCondition] | None, meta(merge_key="type", list_type="atomic", proto=1)
    ] = None
    start_time: Annotated[Time | None, meta(proto=2)] = None
    completion_time: Annotated[Time | None, meta(proto=3)] = None
    active: Annotated[int | None, meta(minimum=0, proto=4, omitempty=True)] = None
    succeeded: Annotated[int | None, meta(minimum=0, proto=5, omitempty=True)] = None
    failed: Annotated[int | None, meta(minimum=0, proto=6, omitempty=True)] = None
    terminating: Annotated[int | None, meta(minimum=0, proto=11)] = None
    completed_indexes: Annotated[str | None, meta(proto=7, omitempty=True)] = None
    failed_indexes: Annotated[str | None, meta(proto=10)] = None
    uncounted_terminated_pods: Annotated[UncountedTerminatedPods | None, meta(proto=8)] = None
    ready: Annotated[int | None, meta(minimum=0, proto=9)] = None


def _condition_true(job: Job, condition_type: str) -> bool:
    for condition in (job.status.conditions if job.status else None) or ():
        if condition.type == condition_type:
            return condition.status == "True"
    return False


def _job_status_cell(o: Job, now: datetime.datetime) -> str:
    if _condition_true(o, "Complete"):
        return "Complete"
    if _condition_true(o, "Failed"):
        return "Failed"
    if o.metadata.deletion_timestamp is not None:
        return "Terminating"
    for condition_type in ("Suspended", "FailureTarget", "SuccessCriteriaMet"):
        if _condition_true(o, condition_type):
            return condition_type
    return "Running"


def _job_completions(o: Job, now: datetime.datetime) -> str:
    spec, status = o.spec or JobSpec(), o.status or JobStatus()
    succeeded = status.succeeded or 0
    if spec.completions is not None:
        return f"{succeeded}/{spec.completions}"
    if (spec.parallelism or 0) > 1:
        return f"{succeeded}/1 of {spec.parallelism}"
    return f"{succeeded}/1"


def _job_duration(o: Job, now: datetime.datetime) -> str:
    status = o.status or JobStatus()
    if status.start_time is None:
        return ""
    return human_duration((status.completion_time or now) - status.start_time)


def _job_template(o: Job) -> PodTemplateSpec | None:
    return o.spec.template if o.spec is not None else None


def _job_selector(o: Job) -> LabelSelector | None:
    return o.spec.selector if o.spec is not None else None


@kind(
    group=GROUP,
    version="v1",
    plural="jobs",
    categories=("all",),
    subresources=("status",),
    columns=(
        NAME_COLUMN,
        Column("Status", _job_status_cell, description="Status of the job."),
        Column(
            "Completions",
            _job_completions,
            description="The number of pods which reached phase Succeeded.",
        ),
        Column("Duration", _job_duration, description="Time required to complete the job."),
        AGE_COLUMN,
        *template_columns(_job_template),
        selector_column(_job_selector),
    ),
    field_selectors={"status.successful": lambda o: str((o.status or JobStatus()).succeeded or 0)},
)
class Job(Resource):
    """Runs pods until a number of them succeed (or too many fail)."""

    spec: Annotated[JobSpec | None, meta(required=True, proto=2)] = None
    status: Annotated[JobStatus | None, meta(proto=3)] = None

    def set_defaults(self) -> None:
        # Job defaults belong to the Job, not to JobSpec: a CronJob's jobTemplate keeps its
        # spec as written, as upstream does.
        spec = self.spec
        if spec is None:
            return
        if spec.completions is None and spec.parallelism is None:
            spec.completions = 1
        if spec.parallelism is None:
            spec.parallelism = 1
        if spec.backoff_limit is None:
            spec.backoff_limit = 2**31 - 1 if spec.backoff_limit_per_index is not None else 6
        template_labels = spec.template.labels() if spec.template is not None else {}
        if template_labels and not self.metadata.labels:
            self.metadata.labels = dict(template_labels)
        if spec.completion_mode is None:
            spec.completion_mode = NON_INDEXED
        if spec.suspend is None:
            spec.suspend = False
        if spec.pod_replacement_policy is None:
            spec.pod_replacement_policy = (
                FAILED if spec.pod_failure_policy is not None else TERMINATING_OR_FAILED
            )
        if spec.manual_selector is None:
            spec.manual_selector = False

    def validate(self, path: Path, errors: ErrorList) -> None:
        spec = self.spec
        if spec is None:
            return
        # The server generates the selector before validation; one may not be there yet.
        if spec.selector is not None:
            validate_template_selected(spec.selector, spec.template, path.child("spec"), errors)
        completions = spec.completions
        if spec.completion_mode == INDEXED and completions is not None and completions > 0:
            hostname = f"{self.metadata.name or ''}-{completions - 1}"
            if names.is_dns1123_label(hostname):
                errors.invalid(
                    path.child("metadata").child("name"),
                    self.metadata.name,
                    f"will not able to create pod with invalid DNS label: {hostname}",
                )

    def validate_update(self, old: Self, errors: ErrorList) -> None:
        new_spec, old_spec = self.spec or JobSpec(), old.spec or JobSpec()
        spec_path = ROOT.child("spec")
        if new_spec.completions != old_spec.completions:
            # Indexed Jobs are elastic: completions may follow parallelism up and down.
            if new_spec.completion_mode != INDEXED:
                errors.immutable(spec_path.child("completions"), new_spec.completions)
            elif new_spec.completions is not None and new_spec.completions != new_spec.parallelism:
                errors.invalid(
                    spec_path.child("completions"),
                    new_spec.completions,
                    "can only be modified in tandem with spec.parallelism",
                )
        for attr, name in (
            ("selector", "selector"),
            ("template", "template"),
            ("completion_mode", "completionMode"),
            ("pod_failure_policy", "podFailurePolicy"),
            ("backoff_limit_per_index", "backoffLimitPerIndex"),
            ("managed_by", "managedBy"),
            ("success_policy", "successPolicy"),
        ):
            value = getattr(new_spec, attr)
            if value != getattr(old_spec, attr):
                errors.immutable(spec_path.child(name), msgspec.to_builtins(value))


# CronJob.


class JobTemplateSpec(Struct):
    """The Job a CronJob creates at each scheduled time."""

    metadata: Annotated[ObjectMeta | None, meta(proto=1)] = None
    spec: Annotated[JobSpec | None, meta(proto=2)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        spec = self.spec
        if spec is None:
            return
        if spec.selector is not None:
            errors.invalid(
                path.child("spec").child("selector"),
                msgspec.to_builtins(spec.selector),
                "`selector` will be auto-generated",
            )
        if spec.manual_selector:
            errors.not_supported(
                path.child("spec").child("manualSelector"), spec.manual_selector, ("nil", "false")
            )


_TIME_ZONE_PART = re.compile(r"^[A-Za-z.\-_0-9+]{1,14}$")


def _validate_time_zone(time_zone: str, path: Path, errors: ErrorList) -> None:
    if not time_zone:
        errors.invalid(path, time_zone, "timeZone must be nil or non-empty string")
        return
    for part in time_zone.split("/"):
        if part in (".", "..") or part.startswith("-") or not _TIME_ZONE_PART.match(part):
            errors.invalid(path, time_zone, f"unknown time zone {time_zone}")
            return
    if time_zone.lower() == "local":
        errors.invalid(
            path,
            time_zone,
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        )
        return
    try:
        ZoneInfo(time_zone)
    except (KeyError, ValueError, OSError):
        errors.invalid(path, time_zone, f"unknown time zone {time_zone}")


class CronJobSpec(Struct):
    """When to create Jobs, from what template, and what to do when runs overlap."""

    schedule: Annotated[
        str | None,
        meta(required=True, doc='When to run, in cron format: "*/5 * * * *", "@hourly".', proto=1),
    ] = None
    time_zone: Annotated[
        str | None,
        meta(doc="The IANA time zone the schedule is read in (the controller's).", proto=8),
    ] = None
    starting_deadline_seconds: Annotated[
        int | None,
        meta(
            minimum=0,
            doc="Seconds after a missed start time within which it may still run.",
            proto=2,
            int64=True,
        ),
    ] = None
    concurrency_policy: Annotated[
        str | None,
        meta(
            required=True,
            enum=("Allow", "Forbid", "Replace"),
            doc="Whether runs may overlap: Allow (the default), Forbid or Replace.",
            proto=3,
            omitempty=True,
        ),
    ] = None
    suspend: Annotated[bool | None, meta(doc="Whether new runs are held back.", proto=4)] = None
    job_template: Annotated[
        JobTemplateSpec | None, meta(required=True, doc="The Job created at each run.", proto=5)
    ] = None
    successful_jobs_history_limit: Annotated[
        int | None, meta(minimum=0, doc="Finished Jobs kept. Defaults to 3.", proto=6)
    ] = None
    failed_jobs_history_limit: Annotated[
        int | None, meta(minimum=0, doc="Failed Jobs kept. Defaults to 1.", proto=7)
    ] = None

    def set_defaults(self) -> None:
        if not self.concurrency_policy:
            self.concurrency_policy = "Allow"
        if self.suspend is None:
            self.suspend = False
        if self.successful_jobs_history_limit is None:
            self.successful_jobs_history_limit = 3
        if self.failed_jobs_history_limit is None:
            self.failed_jobs_history_limit = 1

    def validate(self, path: Path, errors: ErrorList) -> None:
        schedule_path = path.child("schedule")
        if self.schedule:
            try:
                parse_cron(self.schedule)
            except CronError as error:
                errors.invalid(schedule_path, self.schedule, str(error))
            if "TZ" in self.schedule:
                errors.invalid(
                    schedule_path,
                    self.schedule,
                    "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
                )
        if self.time_zone is not None:
            _validate_time_zone(self.time_zone, path.child("timeZone"), errors)


class CronJobStatus(Struct):
    """The Jobs running now and when the schedule last fired and last succeeded."""

    active: Annotated[list[ObjectReference] | None, atomic(proto=1)] = None
    last_schedule_time: Annotated[Time | None, meta(proto=4)] = None
    last_successful_time: Annotated[Time | None, meta(proto=5)] = None


def _cronjob_template(o: CronJob) -> PodTemplateSpec | None:
    job_template = o.spec.job_template if o.spec is not None else None
    job_spec = job_template.spec if job_template is not None else None
    return job_spec.template if job_spec is not None else None


def _cronjob_selector(o: CronJob) -> LabelSelector | None:
    job_template = o.spec.job_template if o.spec is not None else None
    job_spec = job_template.spec if job_template is not None else None
    return job_spec.selector if job_spec is not None else None


def _cronjob_suspend(o: CronJob, now: datetime.datetime) -> str:
    suspend = o.spec.suspend if o.spec is not None else None
    if suspend is None:
        return "<unset>"
    return "True" if suspend else "False"


def _cronjob_last_schedule(o: CronJob, now: datetime.datetime) -> str:
    last = o.status.last_schedule_time if o.status is not None else None
    return age(last, now) if last is not None else "<none>"


@kind(
    group=GROUP,
    version="v1",
    plural="cronjobs",
    short_names=("cj",),
    categories=("all",),
    subresources=("status",),
    columns=(
        NAME_COLUMN,
        Column(
            "Schedule",
            lambda o, now: o.spec.schedule if o.spec is not None else None,
            description="The schedule in Cron format.",
        ),
        Column(
            "Timezone",
            lambda o, now: (o.spec.time_zone if o.spec is not None else None) or "<none>",
            description="The time zone name for the given schedule.",
        ),
        Column(
            "Suspend",
            _cronjob_suspend,
            type="boolean",
            description="This flag tells the controller to suspend subsequent executions.",
        ),
        Column(
            "Active",
            lambda o, now: len((o.status.active if o.status is not None else None) or ()),
            type="integer",
            description="A list of pointers to currently running jobs.",
        ),
        Column(
            "Last Schedule",
            _cronjob_last_schedule,
            description="Information when was the last time the job was successfully scheduled.",
        ),
        AGE_COLUMN,
        *template_columns(_cronjob_template),
        selector_column(_cronjob_selector),
    ),
)
class CronJob(Resource):
    """Creates a Job from its template each time its schedule fires."""

    spec: Annotated[CronJobSpec | None, meta(required=True, proto=2)] = None
    status: Annotated[CronJobStatus | None, meta(proto=3)] = None

    def validate(self, path: Path, errors: ErrorList) -> None:
        name = self.metadata.name
        if name is not None and len(name) > _MAX_CRONJOB_NAME:
            errors.invalid(
                path.child("metadata").child("name"),
                name,
                f"must be no more than {_MAX_CRONJOB_NAME} characters",
            )
