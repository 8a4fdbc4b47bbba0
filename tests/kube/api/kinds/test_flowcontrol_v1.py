"""flowcontrol.apiserver.k8s.io/v1 FlowSchema and PriorityLevelConfiguration: v1 defaults,
validation with upstream's paths and messages, printer cells and registration."""

from __future__ import annotations

from typing import Any

import pytest

from kube.api import walk
from kube.api.errors import ErrorType
from kube.api.kinds.flowcontrol_v1 import FlowSchema, PriorityLevelConfiguration
from tests.kube.api.kinds.helpers import CREATED, cells, decode, merge, ordered, problems

FORBIDDEN, INVALID, REQUIRED = ErrorType.FORBIDDEN, ErrorType.INVALID, ErrorType.REQUIRED
NOT_SUPPORTED = ErrorType.NOT_SUPPORTED

SCHEMA: dict[str, Any] = {
    "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
    "kind": "FlowSchema",
    "metadata": {"name": "batch", "creationTimestamp": CREATED},
    "spec": {
        "priorityLevelConfiguration": {"name": "batch"},
        "distinguisherMethod": {"type": "ByNamespace"},
        "rules": [
            {
                "subjects": [
                    {"kind": "ServiceAccount", "serviceAccount": {"namespace": "ci", "name": "*"}}
                ],
                "resourceRules": [
                    {
                        "verbs": ["list"],
                        "apiGroups": ["batch"],
                        "resources": ["jobs"],
                        "namespaces": ["*"],
                    }
                ],
                "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics/*"]}],
            }
        ],
    },
}
LEVEL: dict[str, Any] = {
    "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
    "kind": "PriorityLevelConfiguration",
    "metadata": {"name": "batch", "creationTimestamp": CREATED},
    "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {}}}},
}
RULE = ("spec", "rules", 0)


def rule(**changes: Any) -> dict[str, Any]:
    """SCHEMA with its only rule changed."""
    changed = merge(SCHEMA["spec"]["rules"][0], changes)
    return merge(SCHEMA, {"spec": {"rules": [changed]}})


def test_v1_defaults() -> None:
    schema = decode(SCHEMA, FlowSchema)
    assert schema.spec.matching_precedence == 1000
    level = decode(LEVEL, PriorityLevelConfiguration)
    limited = level.spec.limited
    assert (limited.nominal_concurrency_shares, limited.lendable_percent) == (30, 0)
    assert limited.borrowing_limit_percent is None
    queuing = limited.limit_response.queuing
    assert (queuing.queues, queuing.hand_size, queuing.queue_length_limit) == (64, 8, 50)
    exempt = decode(
        {**LEVEL, "metadata": {"name": "exempt"}, "spec": {"type": "Exempt"}},
        PriorityLevelConfiguration,
    )
    assert (exempt.spec.exempt.nominal_concurrency_shares, exempt.spec.exempt.lendable_percent) == (
        0,
        0,
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(SCHEMA, [], id="valid"),
        pytest.param(
            merge(SCHEMA, {"spec": {"matchingPrecedence": 10001}}),
            [("spec.matchingPrecedence", INVALID)],
            id="precedence-too-high",
        ),
        pytest.param(
            merge(SCHEMA, {"spec": {"matchingPrecedence": 1}}),
            [("spec.matchingPrecedence", INVALID)],
            id="precedence-one-not-exempt",
        ),
        pytest.param(
            merge(SCHEMA, {"spec": {"distinguisherMethod": {"type": "ByVerb"}}}),
            [("spec.distinguisherMethod.type", NOT_SUPPORTED)],
            id="bad-distinguisher",
        ),
        pytest.param(
            merge(SCHEMA, {"spec": {"priorityLevelConfiguration": None}}),
            [("spec.priorityLevelConfiguration.name", REQUIRED)],
            id="no-level",
        ),
        pytest.param(rule(subjects=None), [("spec.rules[0].subjects", REQUIRED)], id="no-subjects"),
        pytest.param(
            rule(resourceRules=None, nonResourceRules=None),
            [("spec.rules[0]", REQUIRED)],
            id="no-rules",
        ),
        pytest.param(
            rule(subjects=[{"kind": "User", "group": {"name": "g"}}]),
            [
                ("spec.rules[0].subjects[0].user", REQUIRED),
                ("spec.rules[0].subjects[0].group", FORBIDDEN),
            ],
            id="user-subject-with-group",
        ),
        pytest.param(
            rule(subjects=[{"kind": "Robot"}]),
            [("spec.rules[0].subjects[0].kind", NOT_SUPPORTED)],
            id="bad-subject-kind",
        ),
        pytest.param(
            rule(subjects=[{"kind": "ServiceAccount", "serviceAccount": {"name": "x"}}]),
            [("spec.rules[0].subjects[0].serviceAccount.namespace", REQUIRED)],
            id="account-without-namespace",
        ),
        pytest.param(
            rule(
                resourceRules=[
                    {
                        "verbs": ["*", "get"],
                        "apiGroups": [],
                        "resources": ["jobs"],
                        "namespaces": ["Not_A_Label"],
                    }
                ]
            ),
            [
                ("spec.rules[0].resourceRules[0].verbs", INVALID),
                ("spec.rules[0].resourceRules[0].apiGroups", REQUIRED),
                ("spec.rules[0].resourceRules[0].namespaces[0]", INVALID),
            ],
            id="bad-resource-rule",
        ),
        pytest.param(
            rule(resourceRules=[{"verbs": ["fly"], "apiGroups": [""], "resources": ["pods"]}]),
            [
                ("spec.rules[0].resourceRules[0].verbs", NOT_SUPPORTED),
                ("spec.rules[0].resourceRules[0].namespaces", REQUIRED),
            ],
            id="unknown-verb-no-namespaces",
        ),
        pytest.param(
            rule(
                nonResourceRules=[
                    {"verbs": ["get"], "nonResourceURLs": ["metrics", "/a//b", "/a/*/b"]}
                ]
            ),
            [
                ("spec.rules[0].nonResourceRules[0].nonResourceURLs[0]", INVALID),
                ("spec.rules[0].nonResourceRules[0].nonResourceURLs[1]", INVALID),
                ("spec.rules[0].nonResourceRules[0].nonResourceURLs[2]", INVALID),
            ],
            id="bad-urls",
        ),
    ],
)
def test_flowschema_validation(raw: dict[str, Any], expected: list[tuple[str, ErrorType]]) -> None:
    assert problems(decode(raw, FlowSchema)) == ordered(expected)


LIMITED = ("spec", "limited")


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        pytest.param({}, [], id="valid"),
        pytest.param(
            {
                "spec": {
                    "limited": {
                        "nominalConcurrencyShares": -1,
                        "lendablePercent": 101,
                        "borrowingLimitPercent": -1,
                    }
                }
            },
            [
                ("spec.limited.nominalConcurrencyShares", INVALID),
                ("spec.limited.lendablePercent", INVALID),
                ("spec.limited.borrowingLimitPercent", INVALID),
            ],
            id="bad-shares",
        ),
        pytest.param(
            {"spec": {"limited": {"limitResponse": {"queuing": {"queues": 4, "handSize": 5}}}}},
            [("spec.limited.limitResponse.queuing.handSize", INVALID)],
            id="hand-larger-than-deck",
        ),
        pytest.param(
            {
                "spec": {
                    "limited": {"limitResponse": {"queuing": {"queues": 10_000_000, "handSize": 8}}}
                }
            },
            [("spec.limited.limitResponse.queuing.handSize", INVALID)],
            id="too-much-entropy",
        ),
        pytest.param(
            {"spec": {"limited": {"limitResponse": {"type": "Reject"}}}},
            [("spec.limited.limitResponse.queuing", FORBIDDEN)],
            id="reject-with-queuing",
        ),
        pytest.param(
            {"spec": {"limited": {"limitResponse": {"type": "Queue", "queuing": None}}}},
            [("spec.limited.limitResponse.queuing", REQUIRED)],
            id="queue-without-queuing",
        ),
        pytest.param(
            {"spec": {"limited": None}}, [("spec.limited", REQUIRED)], id="limited-missing"
        ),
        pytest.param(
            {"spec": {"exempt": {}}}, [("spec.exempt", FORBIDDEN)], id="limited-with-exempt"
        ),
        pytest.param(
            {"spec": {"type": "Exempt"}},
            [("spec.type", INVALID), ("spec.limited", FORBIDDEN)],
            id="exempt-type-other-name",
        ),
        pytest.param(
            {"spec": {"type": "Sometimes"}}, [("spec.type", NOT_SUPPORTED)], id="bad-type"
        ),
    ],
)
def test_priority_level_validation(
    patch: dict[str, Any], expected: list[tuple[str, ErrorType]]
) -> None:
    assert problems(decode(merge(LEVEL, patch), PriorityLevelConfiguration)) == ordered(expected)


def test_messages() -> None:
    precedence = walk.validate(
        decode(merge(SCHEMA, {"spec": {"matchingPrecedence": 1}}), FlowSchema)
    )
    assert [str(e) for e in precedence] == [
        "spec.matchingPrecedence: Invalid value: 1: only the schema named 'exempt' may have "
        "matchingPrecedence 1"
    ]
    hand = {"spec": {"limited": {"limitResponse": {"queuing": {"queues": 4, "handSize": 5}}}}}
    assert [
        str(e) for e in walk.validate(decode(merge(LEVEL, hand), PriorityLevelConfiguration))
    ] == [
        "spec.limited.limitResponse.queuing.handSize: Invalid value: 5: should not be greater "
        "than queues (4)"
    ]
    named = merge(LEVEL, {"metadata": {"name": "exempt"}})
    messages = [str(e) for e in walk.validate(decode(named, PriorityLevelConfiguration))]
    assert messages[0] == (
        "spec.type: Invalid value: \"Limited\": type must be 'Exempt' if and only if name is "
        "'exempt'"
    )
    assert messages[1].endswith(
        "spec of 'exempt' except the 'spec.exempt' field must equal the fixed value"
    )


def test_mandatory_specs_are_fixed() -> None:
    exempt = merge(
        LEVEL, {"metadata": {"name": "exempt"}, "spec": {"type": "Exempt", "limited": None}}
    )
    assert problems(decode(exempt, PriorityLevelConfiguration)) == []
    shares = merge(exempt, {"spec": {"exempt": {"nominalConcurrencyShares": 10}}})
    assert problems(decode(shares, PriorityLevelConfiguration)) == [], "exempt's shares may change"
    catch_all = merge(
        LEVEL,
        {
            "metadata": {"name": "catch-all"},
            "spec": {
                "limited": {
                    "nominalConcurrencyShares": 5,
                    "limitResponse": {"type": "Reject", "queuing": None},
                }
            },
        },
    )
    assert problems(decode(catch_all, PriorityLevelConfiguration)) == []
    more = merge(catch_all, {"spec": {"limited": {"nominalConcurrencyShares": 50}}})
    (message,) = [str(e) for e in walk.validate(decode(more, PriorityLevelConfiguration))]
    assert message.endswith("spec of 'catch-all' must equal the fixed value")
    schema = merge(SCHEMA, {"metadata": {"name": "catch-all"}})
    assert problems(decode(schema, FlowSchema)) == [("spec", INVALID)]


def test_cells_and_registration() -> None:
    schema = decode(SCHEMA, FlowSchema)
    assert cells(schema) == ["batch", "batch", 1000, "ByNamespace", "5m", "?"]
    dangling = merge(SCHEMA, {"status": {"conditions": [{"type": "Dangling", "status": "True"}]}})
    assert cells(decode(dangling, FlowSchema))[-1] == "True"
    no_method = merge(SCHEMA, {"spec": {"distinguisherMethod": None}})
    assert cells(decode(no_method, FlowSchema))[3] == "*"
    assert cells(decode(LEVEL, PriorityLevelConfiguration)) == [
        "batch",
        "Limited",
        30,
        64,
        8,
        50,
        "5m",
    ]
    rejecting = merge(
        LEVEL, {"spec": {"limited": {"limitResponse": {"type": "Reject", "queuing": None}}}}
    )
    assert cells(decode(rejecting, PriorityLevelConfiguration))[2:6] == [
        30,
        "<none>",
        "<none>",
        "<none>",
    ]
    for cls, plural, columns in (
        (
            FlowSchema,
            "flowschemas",
            [
                "Name",
                "PriorityLevel",
                "MatchingPrecedence",
                "DistinguisherMethod",
                "Age",
                "MissingPL",
            ],
        ),
        (
            PriorityLevelConfiguration,
            "prioritylevelconfigurations",
            [
                "Name",
                "Type",
                "NominalConcurrencyShares",
                "Queues",
                "HandSize",
                "QueueLengthLimit",
                "Age",
            ],
        ),
    ):
        info = cls.kind_info
        assert (info.group, info.version, info.plural, info.namespaced, info.subresources) == (
            "flowcontrol.apiserver.k8s.io",
            "v1",
            plural,
            False,
            ("status",),
        )
        assert [c.name for c in info.columns] == columns
