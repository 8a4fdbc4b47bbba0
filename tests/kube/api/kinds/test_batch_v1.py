"""batch/v1: Job and CronJob defaults, validation, update rules, printer cells, field selectors."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest

from kube.api import walk
from kube.api.codec import from_builtins
from kube.api.errors import ErrorType
from kube.api.kinds.autoscaling_v1 import Scale
from kube.api.kinds.batch_v1 import CronJob, Job, parse_indexes
from kube.api.meta_v1 import Resource
from kube.api.scheme import NOT_SERVED
from tests.kube.api.kinds.helpers import (
    CREATED,
    DUPLICATE,
    INVALID,
    NOT_SUPPORTED,
    REQUIRED,
    TOO_LONG,
    TOO_MANY,
    decode,
    merge,
    named_cells,
    problems,
)


def built(obj: Any) -> dict[str, Any]:
    out = msgspec.to_builtins(obj)
    assert isinstance(out, dict)
    return out


TEMPLATE = {
    "metadata": {"labels": {"app": "pi"}},
    "spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "pi", "image": "perl:5.34"}],
        "initContainers": [{"name": "setup", "image": "busybox"}],
    },
}
JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "pi", "namespace": "default", "creationTimestamp": CREATED},
    "spec": {"template": TEMPLATE},
}
SELECTED_JOB = merge(
    JOB,
    {
        "spec": {
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u1"}},
            "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "u1"}}},
        }
    },
)
CRON_JOB = {
    "apiVersion": "batch/v1",
    "kind": "CronJob",
    "metadata": {"name": "hello", "namespace": "default", "creationTimestamp": CREATED},
    "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": TEMPLATE}}},
}


# Registration.


def test_registration() -> None:
    job, cron, scale = Job.kind_info, CronJob.kind_info, Scale.kind_info
    assert (job.group, job.version, job.plural, job.short_names) == ("batch", "v1", "jobs", ())
    assert (cron.plural, cron.short_names) == ("cronjobs", ("cj",))
    assert job.categories == cron.categories == ("all",)
    assert job.subresources == cron.subresources == ("status",)
    assert (scale.group, scale.plural, scale.verbs) == ("autoscaling", "scales", NOT_SERVED)


# Defaults.


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        (
            {},
            {
                "completions": 1,
                "parallelism": 1,
                "backoffLimit": 6,
                "completionMode": "NonIndexed",
                "suspend": False,
                "podReplacementPolicy": "TerminatingOrFailed",
                "manualSelector": False,
            },
        ),
        ({"spec": {"parallelism": 3}}, {"completions": None, "parallelism": 3}),
        ({"spec": {"completions": 5}}, {"completions": 5, "parallelism": 1}),
        (
            {"spec": {"completionMode": "Indexed", "completions": 3, "backoffLimitPerIndex": 1}},
            {"backoffLimit": 2**31 - 1},
        ),
        (
            {
                "spec": {
                    "podFailurePolicy": {
                        "rules": [{"action": "Ignore", "onPodConditions": [{"type": "X"}]}]
                    }
                }
            },
            {
                "podReplacementPolicy": "Failed",
                "podFailurePolicy": {
                    "rules": [
                        {"action": "Ignore", "onPodConditions": [{"type": "X", "status": "True"}]}
                    ]
                },
            },
        ),
        ({"spec": {"suspend": True, "backoffLimit": 0}}, {"suspend": True, "backoffLimit": 0}),
    ],
    ids=[
        "minimal",
        "parallelism-only",
        "completions-only",
        "backoff-limit-per-index",
        "pod-failure-policy",
        "keeps-user-values",
    ],
)
def test_job_defaults(patch: dict[str, Any], expected: dict[str, Any]) -> None:
    spec = built(decode(merge(JOB, patch), Job))["spec"]
    assert {key: spec.get(key) for key in expected} == expected


def test_job_copies_template_labels_to_its_own() -> None:
    assert decode(JOB, Job).metadata.labels == {"app": "pi"}
    labelled = decode(merge(JOB, {"metadata": {"labels": {"team": "x"}}}), Job)
    assert labelled.metadata.labels == {"team": "x"}


def test_cronjob_defaults_leave_the_job_template_alone() -> None:
    spec = built(decode(CRON_JOB, CronJob))["spec"]
    assert {
        k: spec.get(k)
        for k in (
            "concurrencyPolicy",
            "suspend",
            "successfulJobsHistoryLimit",
            "failedJobsHistoryLimit",
        )
    } == {
        "concurrencyPolicy": "Allow",
        "suspend": False,
        "successfulJobsHistoryLimit": 3,
        "failedJobsHistoryLimit": 1,
    }
    job_spec = spec["jobTemplate"]["spec"]
    assert "completions" not in job_spec and "backoffLimit" not in job_spec


# Validation.

RESTART = "spec.template.spec.restartPolicy"
PFP = "spec.podFailurePolicy.rules[0]"


def pod_failure(*rules: dict[str, Any], restart: str = "Never") -> dict[str, Any]:
    return {
        "spec": {
            "podFailurePolicy": {"rules": list(rules)},
            "template": {"spec": {"restartPolicy": restart}},
        }
    }


def exit_codes(operator: str, values: list[int], **extra: Any) -> dict[str, Any]:
    return {"action": "FailJob", "onExitCodes": {"operator": operator, "values": values, **extra}}


def indexed(completions: int | None = 4, **spec: Any) -> dict[str, Any]:
    return {"spec": {"completionMode": "Indexed", "completions": completions, **spec}}


VALIDATION: list[tuple[str, type[Resource], dict[str, Any], list[tuple[str, ErrorType]]]] = [
    ("job-valid-without-selector", Job, JOB, []),
    ("job-valid-with-selector", Job, SELECTED_JOB, []),
    (
        "job-selector-mismatch",
        Job,
        merge(JOB, {"spec": {"selector": {"matchLabels": {"app": "other"}}}}),
        [("spec.template.metadata.labels", INVALID)],
    ),
    ("job-no-spec", Job, {**JOB, "spec": None}, [("spec", REQUIRED)]),
    (
        "job-restart-always",
        Job,
        merge(JOB, {"spec": {"template": {"spec": {"restartPolicy": "Always"}}}}),
        [(RESTART, REQUIRED)],
    ),
    (
        "job-restart-defaulted",
        Job,
        merge(JOB, {"spec": {"template": {"spec": {"restartPolicy": None}}}}),
        [(RESTART, REQUIRED)],
    ),
    (
        "job-restart-on-failure",
        Job,
        merge(JOB, {"spec": {"template": {"spec": {"restartPolicy": "OnFailure"}}}}),
        [],
    ),
    (
        "job-negative-counts",
        Job,
        merge(
            JOB,
            {
                "spec": {
                    "parallelism": -1,
                    "completions": -1,
                    "backoffLimit": -1,
                    "activeDeadlineSeconds": -1,
                    "ttlSecondsAfterFinished": -1,
                }
            },
        ),
        [
            ("spec.activeDeadlineSeconds", INVALID),
            ("spec.backoffLimit", INVALID),
            ("spec.completions", INVALID),
            ("spec.parallelism", INVALID),
            ("spec.ttlSecondsAfterFinished", INVALID),
        ],
    ),
    ("job-zero-ttl", Job, merge(JOB, {"spec": {"ttlSecondsAfterFinished": 0}}), []),
    (
        "job-unknown-completion-mode",
        Job,
        merge(JOB, {"spec": {"completionMode": "Sometimes"}}),
        [("spec.completionMode", NOT_SUPPORTED)],
    ),
    ("job-indexed", Job, merge(JOB, indexed()), []),
    (
        "job-indexed-without-completions",
        Job,
        merge(JOB, indexed(None, parallelism=2)),
        [("spec.completions", REQUIRED)],
    ),
    (
        "job-indexed-too-parallel",
        Job,
        merge(JOB, indexed(parallelism=100_001)),
        [("spec.parallelism", INVALID)],
    ),
    (
        "job-indexed-name-too-long",
        Job,
        merge(JOB, {"metadata": {"name": "j" * 62}, **indexed(10)}),
        [("metadata.name", INVALID)],
    ),
    (
        "job-per-index-needs-indexed",
        Job,
        merge(JOB, {"spec": {"backoffLimitPerIndex": 1, "maxFailedIndexes": 1}}),
        [("spec.backoffLimitPerIndex", INVALID), ("spec.maxFailedIndexes", INVALID)],
    ),
    (
        "job-max-failed-needs-per-index",
        Job,
        merge(JOB, indexed(maxFailedIndexes=1)),
        [("spec.backoffLimitPerIndex", REQUIRED)],
    ),
    (
        "job-max-failed-above-completions",
        Job,
        merge(JOB, indexed(backoffLimitPerIndex=1, maxFailedIndexes=5)),
        [("spec.maxFailedIndexes", INVALID)],
    ),
    (
        "job-high-completions-need-max-failed",
        Job,
        merge(JOB, indexed(200_000, backoffLimitPerIndex=1, parallelism=20_000)),
        [("spec.maxFailedIndexes", REQUIRED), ("spec.parallelism", INVALID)],
    ),
    ("job-managed-by", Job, merge(JOB, {"spec": {"managedBy": "acme.io/queue"}}), []),
    (
        "job-managed-by-not-a-path",
        Job,
        merge(JOB, {"spec": {"managedBy": "queue"}}),
        [("spec.managedBy", INVALID)],
    ),
    (
        "job-managed-by-bad-domain",
        Job,
        merge(JOB, {"spec": {"managedBy": "Acme_io/queue"}}),
        [("spec.managedBy", INVALID)],
    ),
    (
        "job-managed-by-too-long",
        Job,
        merge(JOB, {"spec": {"managedBy": "acme.io/" + "q" * 60}}),
        [("spec.managedBy", TOO_LONG)],
    ),
    (
        "job-replacement-policy",
        Job,
        merge(JOB, {"spec": {"podReplacementPolicy": "Sometimes"}}),
        [("spec.podReplacementPolicy", NOT_SUPPORTED)],
    ),
    (
        "job-pod-failure-policy",
        Job,
        merge(
            JOB,
            pod_failure(
                exit_codes("In", [1, 2], containerName="pi"),
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
                exit_codes("NotIn", [0], containerName="setup"),
            ),
        ),
        [],
    ),
    (
        "job-pod-failure-policy-needs-never",
        Job,
        merge(JOB, pod_failure(exit_codes("In", [1]), restart="OnFailure")),
        [(RESTART, INVALID)],
    ),
    (
        "job-pod-failure-policy-replacement",
        Job,
        merge(
            JOB,
            merge(
                pod_failure(exit_codes("In", [1])),
                {"spec": {"podReplacementPolicy": "TerminatingOrFailed"}},
            ),
        ),
        [("spec.podReplacementPolicy", NOT_SUPPORTED)],
    ),
    (
        "job-rule-without-action",
        Job,
        merge(JOB, pod_failure({"onExitCodes": {"operator": "In", "values": [1]}})),
        [(f"{PFP}.action", REQUIRED)],
    ),
    (
        "job-rule-unknown-action",
        Job,
        merge(JOB, pod_failure({**exit_codes("In", [1]), "action": "Retry"})),
        [(f"{PFP}.action", NOT_SUPPORTED)],
    ),
    (
        "job-rule-fail-index-without-per-index",
        Job,
        merge(JOB, pod_failure({**exit_codes("In", [1]), "action": "FailIndex"})),
        [(f"{PFP}.action", INVALID)],
    ),
    ("job-rule-neither", Job, merge(JOB, pod_failure({"action": "Ignore"})), [(PFP, INVALID)]),
    (
        "job-rule-both",
        Job,
        merge(JOB, pod_failure({**exit_codes("In", [1]), "onPodConditions": [{"type": "X"}]})),
        [(PFP, INVALID)],
    ),
    (
        "job-exit-codes-problems",
        Job,
        merge(JOB, pod_failure(exit_codes("In", [3, 0, 3], containerName="nope"))),
        [
            (f"{PFP}.onExitCodes.containerName", INVALID),
            (f"{PFP}.onExitCodes.values", INVALID),
            (f"{PFP}.onExitCodes.values[1]", INVALID),
            (f"{PFP}.onExitCodes.values[2]", DUPLICATE),
        ],
    ),
    (
        "job-exit-codes-empty",
        Job,
        merge(JOB, pod_failure(exit_codes("In", []))),
        [(f"{PFP}.onExitCodes.values", INVALID)],
    ),
    (
        "job-exit-codes-bad-operator",
        Job,
        merge(JOB, pod_failure(exit_codes("Is", [1]))),
        [(f"{PFP}.onExitCodes.operator", NOT_SUPPORTED)],
    ),
    (
        "job-pod-condition-status",
        Job,
        merge(
            JOB,
            pod_failure(
                {"action": "Ignore", "onPodConditions": [{"type": "X", "status": "Maybe"}]}
            ),
        ),
        [(f"{PFP}.onPodConditions[0].status", NOT_SUPPORTED)],
    ),
    (
        "job-too-many-rules",
        Job,
        merge(JOB, pod_failure(*[exit_codes("In", [1])] * 21)),
        [("spec.podFailurePolicy.rules", TOO_MANY)],
    ),
    (
        "job-success-policy",
        Job,
        merge(
            JOB,
            indexed(successPolicy={"rules": [{"succeededIndexes": "0,2-3", "succeededCount": 2}]}),
        ),
        [],
    ),
    (
        "job-success-policy-needs-indexed",
        Job,
        merge(JOB, {"spec": {"successPolicy": {"rules": [{"succeededCount": 1}]}}}),
        [("spec.successPolicy", INVALID)],
    ),
    (
        "job-success-policy-no-rules",
        Job,
        merge(JOB, indexed(successPolicy={"rules": []})),
        [("spec.successPolicy.rules", REQUIRED)],
    ),
    (
        "job-success-rule-empty",
        Job,
        merge(JOB, indexed(successPolicy={"rules": [{}]})),
        [("spec.successPolicy.rules[0]", REQUIRED)],
    ),
    (
        "job-success-rule-bad-indexes",
        Job,
        merge(JOB, indexed(successPolicy={"rules": [{"succeededIndexes": "3-1"}]})),
        [("spec.successPolicy.rules[0].succeededIndexes", INVALID)],
    ),
    (
        "job-success-rule-count-too-high",
        Job,
        merge(
            JOB, indexed(successPolicy={"rules": [{"succeededIndexes": "1", "succeededCount": 5}]})
        ),
        [
            ("spec.successPolicy.rules[0].succeededCount", INVALID),
            ("spec.successPolicy.rules[0].succeededCount", INVALID),
        ],
    ),
    (
        "job-status-negative",
        Job,
        merge(JOB, {"status": {"active": -1, "ready": -2}}),
        [("status.active", INVALID), ("status.ready", INVALID)],
    ),
    ("cronjob-valid", CronJob, CRON_JOB, []),
    ("cronjob-macro", CronJob, merge(CRON_JOB, {"spec": {"schedule": "@hourly"}}), []),
    ("cronjob-time-zone", CronJob, merge(CRON_JOB, {"spec": {"timeZone": "Europe/Paris"}}), []),
    (
        "cronjob-no-schedule",
        CronJob,
        merge(CRON_JOB, {"spec": {"schedule": None}}),
        [("spec.schedule", REQUIRED)],
    ),
    (
        "cronjob-bad-schedule",
        CronJob,
        merge(CRON_JOB, {"spec": {"schedule": "61 * * * *"}}),
        [("spec.schedule", INVALID)],
    ),
    (
        "cronjob-tz-in-schedule",
        CronJob,
        merge(CRON_JOB, {"spec": {"schedule": "CRON_TZ=UTC 0 * * * *"}}),
        [("spec.schedule", INVALID)],
    ),
    (
        "cronjob-unknown-zone",
        CronJob,
        merge(CRON_JOB, {"spec": {"timeZone": "Mars/Olympus"}}),
        [("spec.timeZone", INVALID)],
    ),
    (
        "cronjob-empty-zone",
        CronJob,
        merge(CRON_JOB, {"spec": {"timeZone": ""}}),
        [("spec.timeZone", INVALID)],
    ),
    (
        "cronjob-local-zone",
        CronJob,
        merge(CRON_JOB, {"spec": {"timeZone": "Local"}}),
        [("spec.timeZone", INVALID)],
    ),
    (
        "cronjob-path-zone",
        CronJob,
        merge(CRON_JOB, {"spec": {"timeZone": "../etc/passwd"}}),
        [("spec.timeZone", INVALID)],
    ),
    (
        "cronjob-concurrency",
        CronJob,
        merge(CRON_JOB, {"spec": {"concurrencyPolicy": "Queue"}}),
        [("spec.concurrencyPolicy", NOT_SUPPORTED)],
    ),
    (
        "cronjob-negative-limits",
        CronJob,
        merge(
            CRON_JOB,
            {
                "spec": {
                    "startingDeadlineSeconds": -1,
                    "successfulJobsHistoryLimit": -1,
                    "failedJobsHistoryLimit": -1,
                }
            },
        ),
        [
            ("spec.failedJobsHistoryLimit", INVALID),
            ("spec.startingDeadlineSeconds", INVALID),
            ("spec.successfulJobsHistoryLimit", INVALID),
        ],
    ),
    (
        "cronjob-template-selector",
        CronJob,
        merge(
            CRON_JOB,
            {
                "spec": {
                    "jobTemplate": {
                        "spec": {"selector": {"matchLabels": {"app": "pi"}}, "manualSelector": True}
                    }
                }
            },
        ),
        [
            ("spec.jobTemplate.spec.manualSelector", NOT_SUPPORTED),
            ("spec.jobTemplate.spec.selector", INVALID),
        ],
    ),
    (
        "cronjob-template-restart-always",
        CronJob,
        merge(
            CRON_JOB,
            {
                "spec": {
                    "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Always"}}}}
                }
            },
        ),
        [("spec.jobTemplate.spec.template.spec.restartPolicy", REQUIRED)],
    ),
    (
        "cronjob-long-name",
        CronJob,
        merge(CRON_JOB, {"metadata": {"name": "c" * 53}}),
        [("metadata.name", INVALID)],
    ),
    ("cronjob-52-name", CronJob, merge(CRON_JOB, {"metadata": {"name": "c" * 52}}), []),
]


@pytest.mark.parametrize(
    ("cls", "raw", "expected"),
    [case[1:] for case in VALIDATION],
    ids=[case[0] for case in VALIDATION],
)
def test_validation(
    cls: type[Resource], raw: dict[str, Any], expected: list[tuple[str, ErrorType]]
) -> None:
    assert problems(decode(raw, cls)) == sorted(expected)


@pytest.mark.parametrize(
    ("cls", "raw", "field", "message"),
    [
        (
            Job,
            merge(JOB, {"spec": {"template": {"spec": {"restartPolicy": "Always"}}}}),
            RESTART,
            'Required value: valid values: "OnFailure", "Never"',
        ),
        (
            Job,
            merge(JOB, pod_failure({"onExitCodes": {"operator": "In", "values": [1]}})),
            f"{PFP}.action",
            'Required value: valid values: ["Count" "FailIndex" "FailJob" "Ignore"]',
        ),
        (
            Job,
            merge(JOB, pod_failure(exit_codes("In", [1]), restart="OnFailure")),
            RESTART,
            'Invalid value: "OnFailure": only "Never" is supported when podFailurePolicy is '
            "specified",
        ),
        (
            Job,
            merge(JOB, {"metadata": {"name": "j" * 62}, **indexed(10)}),
            "metadata.name",
            f'Invalid value: "{"j" * 62}": will not able to create pod with invalid DNS label: '
            f"{'j' * 62}-9",
        ),
        (
            Job,
            merge(JOB, indexed(successPolicy={"rules": [{"succeededIndexes": "3-1"}]})),
            "spec.successPolicy.rules[0].succeededIndexes",
            'Invalid value: "3-1": error parsing succeededIndexes: non-increasing order, '
            "previous: 3, current: 1",
        ),
        (
            CronJob,
            merge(CRON_JOB, {"spec": {"schedule": "61 * * * *"}}),
            "spec.schedule",
            'Invalid value: "61 * * * *": end of range (61) above maximum (59): 61',
        ),
        (
            CronJob,
            merge(CRON_JOB, {"spec": {"schedule": "TZ=UTC 0 * * * *"}}),
            "spec.schedule",
            'Invalid value: "TZ=UTC 0 * * * *": cannot use TZ or CRON_TZ in schedule, use '
            "timeZone field instead",
        ),
        (
            CronJob,
            merge(CRON_JOB, {"spec": {"timeZone": "Mars/Olympus"}}),
            "spec.timeZone",
            'Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus',
        ),
        (
            CronJob,
            merge(
                CRON_JOB,
                {"spec": {"jobTemplate": {"spec": {"selector": {"matchLabels": {"app": "pi"}}}}}},
            ),
            "spec.jobTemplate.spec.selector",
            'Invalid value: {"matchLabels": {"app": "pi"}}: `selector` will be auto-generated',
        ),
        (
            CronJob,
            merge(CRON_JOB, {"metadata": {"name": "c" * 53}}),
            "metadata.name",
            f'Invalid value: "{"c" * 53}": must be no more than 52 characters',
        ),
    ],
    ids=[
        "restart-policy-always",
        "action-required",
        "pod-failure-policy-needs-never",
        "indexed-hostname",
        "success-indexes",
        "schedule",
        "tz-in-schedule",
        "time-zone",
        "template-selector",
        "cronjob-name",
    ],
)
def test_validation_messages(
    cls: type[Resource], raw: dict[str, Any], field: str, message: str
) -> None:
    assert [e.message for e in walk.validate(decode(raw, cls)) if e.field == field] == [message]


@pytest.mark.parametrize(
    ("text", "completions", "expected"),
    [
        ("", 3, 0),
        ("0", 3, 1),
        ("0,2", 3, 2),
        ("1-3,5,7-9", 10, 7),
        (
            "1-2-3",
            10,
            'the fragment "1-2-3" violates the requirement that an index interval '
            "can have at most two parts separated by '-'",
        ),
        ("a", 10, 'cannot convert string to integer for index: "a"'),
        ("1,x-2", 10, 'cannot convert string to integer for index: "x"'),
        ("10", 10, 'too large index: "10"'),
        ("1-10", 10, 'too large index: "10"'),
        ("2,1", 10, "non-increasing order, previous: 2, current: 1"),
        ("1-3,3", 10, "non-increasing order, previous: 3, current: 3"),
    ],
    ids=[
        "empty",
        "one",
        "two",
        "ranges",
        "three-parts",
        "not-a-number",
        "not-a-number-in-range",
        "too-large",
        "too-large-end",
        "decreasing",
        "overlapping",
    ],
)
def test_parse_indexes(text: str, completions: int, expected: int | str) -> None:
    if isinstance(expected, int):
        assert parse_indexes(text, completions) == expected
    else:
        with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
            parse_indexes(text, completions)


# Updates.

UPDATES: list[tuple[str, dict[str, Any], dict[str, Any], list[tuple[str, ErrorType]]]] = [
    ("suspend-and-parallelism", SELECTED_JOB, {"spec": {"suspend": True, "parallelism": 4}}, []),
    ("completions", SELECTED_JOB, {"spec": {"completions": 2}}, [("spec.completions", INVALID)]),
    (
        "selector",
        SELECTED_JOB,
        {"spec": {"selector": {"matchLabels": {"app": "pi"}}}},
        [("spec.selector", INVALID)],
    ),
    (
        "template",
        SELECTED_JOB,
        {"spec": {"template": {"spec": {"containers": [{"name": "pi", "image": "perl:5.36"}]}}}},
        [("spec.template", INVALID)],
    ),
    ("completion-mode", SELECTED_JOB, indexed(1), [("spec.completionMode", INVALID)]),
    (
        "managed-by",
        SELECTED_JOB,
        {"spec": {"managedBy": "acme.io/q"}},
        [("spec.managedBy", INVALID)],
    ),
    (
        "elastic-indexed",
        merge(SELECTED_JOB, indexed(4, parallelism=4)),
        {"spec": {"completions": 6, "parallelism": 6}},
        [],
    ),
    (
        "elastic-indexed-out-of-tandem",
        merge(SELECTED_JOB, indexed(4, parallelism=4)),
        {"spec": {"completions": 6}},
        [("spec.completions", INVALID)],
    ),
]


@pytest.mark.parametrize(
    ("raw", "patch", "expected"),
    [case[1:] for case in UPDATES],
    ids=[case[0] for case in UPDATES],
)
def test_job_update(
    raw: dict[str, Any], patch: dict[str, Any], expected: list[tuple[str, ErrorType]]
) -> None:
    old = decode(raw, Job)  # the stored object, defaults applied
    new = decode(merge(msgspec.to_builtins(old), patch), Job)
    assert sorted((e.field, e.type) for e in walk.validate_update(new, old)) == sorted(expected)


def test_cronjob_template_may_change() -> None:
    old = decode(CRON_JOB, CronJob)
    new = decode(
        merge(
            CRON_JOB,
            {
                "spec": {
                    "schedule": "@daily",
                    "jobTemplate": {
                        "spec": {
                            "template": {
                                "spec": {"containers": [{"name": "pi", "image": "perl:5.36"}]}
                            }
                        }
                    },
                }
            },
        ),
        CronJob,
    )
    assert walk.validate_update(new, old) == []


# Printer cells.


def test_column_names() -> None:
    def names(cls: type[Resource]) -> list[tuple[str, int]]:
        return [(c.name, c.priority) for c in cls.kind_info.columns]

    wide = [("Containers", 1), ("Images", 1), ("Selector", 1)]
    assert names(Job) == [
        ("Name", 0),
        ("Status", 0),
        ("Completions", 0),
        ("Duration", 0),
        ("Age", 0),
        *wide,
    ]
    assert names(CronJob) == [
        ("Name", 0),
        ("Schedule", 0),
        ("Timezone", 0),
        ("Suspend", 0),
        ("Active", 0),
        ("Last Schedule", 0),
        ("Age", 0),
        *wide,
    ]


def condition(kind: str, status: str = "True") -> dict[str, str]:
    return {"type": kind, "status": status}


STARTED = {"startTime": "2026-01-01T11:56:00Z"}
JOB_CELLS = [
    (
        "running",
        SELECTED_JOB,
        {"status": STARTED},
        {"Status": "Running", "Completions": "0/1", "Duration": "4m"},
    ),
    ("not-started", SELECTED_JOB, {}, {"Status": "Running", "Completions": "0/1", "Duration": ""}),
    (
        "complete",
        SELECTED_JOB,
        {
            "status": {
                **STARTED,
                "completionTime": "2026-01-01T11:56:42Z",
                "succeeded": 1,
                "conditions": [condition("SuccessCriteriaMet"), condition("Complete")],
            }
        },
        {"Status": "Complete", "Completions": "1/1", "Duration": "42s"},
    ),
    (
        "failed",
        SELECTED_JOB,
        {
            "status": {
                **STARTED,
                "failed": 7,
                "conditions": [condition("FailureTarget"), condition("Failed")],
            }
        },
        {"Status": "Failed"},
    ),
    (
        "failure-target",
        SELECTED_JOB,
        {"status": {"conditions": [condition("FailureTarget")]}},
        {"Status": "FailureTarget"},
    ),
    (
        "success-criteria-met",
        SELECTED_JOB,
        {"status": {"conditions": [condition("SuccessCriteriaMet")]}},
        {"Status": "SuccessCriteriaMet"},
    ),
    (
        "suspended",
        SELECTED_JOB,
        {"spec": {"suspend": True}, "status": {"conditions": [condition("Suspended")]}},
        {"Status": "Suspended"},
    ),
    (
        "condition-false",
        SELECTED_JOB,
        {"status": {"conditions": [condition("Complete", "False")]}},
        {"Status": "Running"},
    ),
    (
        "terminating",
        SELECTED_JOB,
        {
            "metadata": {"deletionTimestamp": "2026-01-01T11:59:00Z"},
            "status": {"conditions": [condition("Suspended")]},
        },
        {"Status": "Terminating"},
    ),
    (
        "work-queue",
        SELECTED_JOB,
        {"spec": {"parallelism": 3}, "status": {"succeeded": 1}},
        {"Completions": "1/1 of 3"},
    ),
    (
        "completions",
        SELECTED_JOB,
        {"spec": {"completions": 5, "parallelism": 2}, "status": {"succeeded": 2}},
        {"Completions": "2/5"},
    ),
    (
        "wide",
        SELECTED_JOB,
        {},
        {
            "Name": "pi",
            "Age": "5m",
            "Containers": "pi",
            "Images": "perl:5.34",
            "Selector": "batch.kubernetes.io/controller-uid=u1",
        },
    ),
    ("wide-no-selector", JOB, {}, {"Selector": "<none>"}),
]


@pytest.mark.parametrize(
    ("raw", "patch", "expected"),
    [case[1:] for case in JOB_CELLS],
    ids=[case[0] for case in JOB_CELLS],
)
def test_job_cells(raw: dict[str, Any], patch: dict[str, Any], expected: dict[str, Any]) -> None:
    got = named_cells(decode(merge(raw, patch), Job))
    assert {key: got[key] for key in expected} == expected


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        (
            {},
            {
                "Name": "hello",
                "Schedule": "*/5 * * * *",
                "Timezone": "<none>",
                "Suspend": "False",
                "Active": 0,
                "Last Schedule": "<none>",
                "Age": "5m",
                "Containers": "pi",
                "Images": "perl:5.34",
                "Selector": "<none>",
            },
        ),
        (
            {
                "spec": {"timeZone": "Asia/Tokyo", "suspend": True},
                "status": {
                    "lastScheduleTime": "2026-01-01T11:58:00Z",
                    "active": [
                        {"kind": "Job", "name": "hello-1", "namespace": "default"},
                        {"kind": "Job", "name": "hello-2", "namespace": "default"},
                    ],
                },
            },
            {"Timezone": "Asia/Tokyo", "Suspend": "True", "Active": 2, "Last Schedule": "2m"},
        ),
    ],
    ids=["fresh", "running"],
)
def test_cronjob_cells(patch: dict[str, Any], expected: dict[str, Any]) -> None:
    got = named_cells(decode(merge(CRON_JOB, patch), CronJob))
    assert {key: got[key] for key in expected} == expected


def test_cronjob_suspend_unset_without_defaults() -> None:
    cron = from_builtins(CRON_JOB, CronJob).obj
    assert named_cells(cron)["Suspend"] == "<unset>"


def test_field_selectors() -> None:
    job = decode(merge(SELECTED_JOB, {"status": {"succeeded": 3}}), Job)
    assert Job.kind_info.selectable_fields(job) == {
        "metadata.name": "pi",
        "metadata.namespace": "default",
        "status.successful": "3",
    }
    assert Job.kind_info.selectable_fields(decode(JOB, Job))["status.successful"] == "0"
    assert not CronJob.kind_info.supports_field("status.successful")


# autoscaling/v1 Scale.


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"replicas": 0}, []),
        ({"replicas": 3}, []),
        ({"replicas": -1}, [("spec.replicas", INVALID)]),
    ],
    ids=["zero", "three", "negative"],
)
def test_scale_validation(spec: dict[str, Any], expected: list[tuple[str, ErrorType]]) -> None:
    scale = decode(
        {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": spec,
            "status": {"replicas": 2, "selector": "app=web"},
        },
        Scale,
    )
    assert problems(scale) == expected
