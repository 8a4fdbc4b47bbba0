"""The clusterrole-aggregation controller, with fake informers and a fake API."""

from __future__ import annotations

import pytest

from controlplane.controllers import clusterroleaggregation
from kube.api.kinds.rbac_v1 import AggregationRule, ClusterRole, PolicyRule
from kube.api.meta_v1 import LabelSelector, ObjectMeta
from tests.controlplane.controllers.fakes import harness, stamp

READ = PolicyRule(verbs=["get"], api_groups=[""], resources=["pods"])
WRITE = PolicyRule(verbs=["create"], api_groups=[""], resources=["pods"])


def role(name: str, *rules: PolicyRule, labels: dict[str, str] | None = None) -> ClusterRole:
    return stamp(
        ClusterRole(metadata=ObjectMeta(name=name, labels=labels), rules=list(rules) or None)
    )


def aggregate(*rules: PolicyRule) -> ClusterRole:
    selector = LabelSelector(match_labels={"agg": "yes"})
    agg = role("view", *rules)
    agg.aggregation_rule = AggregationRule(cluster_role_selectors=[selector])
    return agg


@pytest.mark.parametrize(
    ("current", "sources", "expected"),
    [
        pytest.param([], [("b", [WRITE]), ("a", [READ])], [READ, WRITE], id="union-by-name"),
        pytest.param([], [("a", [READ]), ("b", [READ, WRITE])], [READ, WRITE], id="no-repeats"),
        pytest.param([READ], [("a", [READ])], None, id="unchanged-not-written"),
        pytest.param([READ, WRITE], [("a", [READ])], [READ], id="removed-rule-dropped"),
    ],
)
async def test_rules_are_the_union(
    current: list[PolicyRule],
    sources: list[tuple[str, list[PolicyRule]]],
    expected: list[PolicyRule] | None,
) -> None:
    h = harness()
    h.store(aggregate(*current), role("unrelated", PolicyRule(verbs=["*"], api_groups=["*"])))
    h.store(*(role(name, *rules, labels={"agg": "yes"}) for name, rules in sources))
    await clusterroleaggregation.new(h.ctx).sync("view")
    patches = h.client.writes("patch", "ClusterRole")
    if expected is None:
        assert patches == []
    else:
        assert [p.obj["rules"] for p in patches] == [
            [
                {"verbs": r.verbs, "apiGroups": r.api_groups, "resources": r.resources}
                for r in expected
            ]
        ]


async def test_a_role_without_aggregation_rule_is_left_alone() -> None:
    h = harness()
    h.store(role("plain", READ))
    await clusterroleaggregation.new(h.ctx).sync("plain")
    assert h.client.actions == []


async def test_any_role_change_enqueues_aggregated_roles() -> None:
    h = harness()
    h.cache(aggregate(), role("plain"))
    controller = clusterroleaggregation.new(h.ctx)
    controller._enqueue_aggregated()
    assert await controller.queue.get() == "view"
    assert len(controller.queue) == 0
