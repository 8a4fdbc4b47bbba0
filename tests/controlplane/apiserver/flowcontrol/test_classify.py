"""Requests matched to upstream's bootstrap FlowSchemas as upstream matches them, and their
flows."""

from __future__ import annotations

import pytest

from controlplane.apiserver.auth import User
from controlplane.apiserver.endpoints.requestinfo import parse
from controlplane.apiserver.flowcontrol import bootstrap, classify
from kube.api.codec import from_builtins
from kube.api.kinds.flowcontrol_v1 import FlowSchema

SCHEMAS = classify.ordered([*bootstrap.MANDATORY_SCHEMAS, *bootstrap.SUGGESTED_SCHEMAS])
AUTHENTICATED = "system:authenticated"


def user(name: str, *groups: str) -> User:
    return User(name, (*groups, AUTHENTICATED))


@pytest.mark.parametrize(
    ("who", "method", "path", "expected"),
    [
        pytest.param(
            user("admin", "system:masters"), "GET", "/api/v1/pods", "exempt", id="masters"
        ),
        pytest.param(
            User("system:anonymous", ("system:unauthenticated",)),
            "GET",
            "/healthz",
            "probes",
            id="anonymous-probe",
        ),
        pytest.param(
            User("system:anonymous", ("system:unauthenticated",)),
            "GET",
            "/version",
            "global-default",
            id="anonymous-other",
        ),
        pytest.param(
            user("system:node:n1", "system:nodes"),
            "PATCH",
            "/api/v1/nodes/n1/status",
            "system-node-high",
            id="node-status",
        ),
        pytest.param(
            user("system:node:n1", "system:nodes"),
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1",
            "system-node-high",
            id="node-lease",
        ),
        pytest.param(
            user("system:node:n1", "system:nodes"),
            "GET",
            "/api/v1/namespaces/default/pods",
            "system-nodes",
            id="node-other",
        ),
        pytest.param(
            user("system:kube-scheduler"),
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler",
            "system-leader-election",
            id="scheduler-lease",
        ),
        pytest.param(
            user("system:kube-scheduler"),
            "GET",
            "/api/v1/pods",
            "kube-scheduler",
            id="scheduler-other",
        ),
        pytest.param(
            user("system:kube-controller-manager"),
            "PUT",
            "/api/v1/namespaces/default/endpoints/web",
            "endpoint-controller",
            id="controller-manager-endpoints",
        ),
        pytest.param(
            user("system:serviceaccount:kube-system:endpoint-controller", "system:serviceaccounts"),
            "GET",
            "/api/v1/namespaces/default/endpoints/web",
            "endpoint-controller",
            id="endpoint-controller-account",
        ),
        pytest.param(
            user("system:serviceaccount:kube-system:job-controller", "system:serviceaccounts"),
            "GET",
            "/apis/batch/v1/jobs",
            "kube-system-service-accounts",
            id="kube-system-account",
        ),
        pytest.param(
            user("system:serviceaccount:default:builder", "system:serviceaccounts"),
            "GET",
            "/api/v1/namespaces/default/pods",
            "service-accounts",
            id="other-account",
        ),
        pytest.param(
            user("alice"), "DELETE", "/api/v1/namespaces/a/pods/x", "global-default", id="user"
        ),
    ],
)
def test_bootstrap_schemas_match_as_upstream(
    who: User, method: str, path: str, expected: str
) -> None:
    target, _, query = path.partition("?")
    info = parse(method, target, dict(q.split("=") for q in query.split("&") if q))
    found = classify.match(SCHEMAS, who, info)
    assert found is not None and found.metadata.name == expected


def schema(
    name: str, precedence: int, rule: dict[str, object], method: str = "ByUser"
) -> FlowSchema:
    raw = {
        "metadata": {"name": name},
        "spec": {
            "priorityLevelConfiguration": {"name": "l"},
            "matchingPrecedence": precedence,
            "distinguisherMethod": {"type": method},
            "rules": [rule],
        },
    }
    return from_builtins(raw, FlowSchema).obj


ANYONE = [{"kind": "Group", "group": {"name": "*"}}]


def test_precedence_then_name_and_rule_details() -> None:
    configmaps = {
        "subjects": ANYONE,
        "resourceRules": [
            {"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "namespaces": ["a"]}
        ],
    }
    status = {
        "subjects": [{"kind": "User", "user": {"name": "bob"}}],
        "resourceRules": [
            {
                "verbs": ["*"],
                "apiGroups": ["apps"],
                "resources": ["deployments/status"],
                "clusterScope": True,
            }
        ],
        "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics/*"]}],
    }
    ordered = classify.ordered(
        [schema("b", 10, configmaps), schema("a", 10, configmaps), schema("s", 5, status)]
    )
    assert [fs.metadata.name for fs in ordered] == ["s", "a", "b"]
    bob, carol = user("bob"), user("carol")

    def matched(who: User, method: str, path: str) -> str | None:
        found = classify.match(ordered, who, parse(method, path, {}))
        return found.metadata.name if found is not None else None

    assert matched(carol, "GET", "/api/v1/namespaces/a/configmaps/x") == "a"
    assert matched(carol, "GET", "/api/v1/namespaces/b/configmaps/x") is None, "namespace"
    assert matched(carol, "PUT", "/api/v1/namespaces/a/configmaps/x") is None, "verb"
    assert matched(bob, "PUT", "/apis/apps/v1/namespaces/a/deployments/d/status") is None, (
        "namespaced, and the rule is cluster-scoped only"
    )
    assert matched(bob, "GET", "/apis/apps/v1/deployments") is None, "not the subresource"
    assert matched(bob, "GET", "/metrics/slis") == "s"
    assert matched(bob, "GET", "/metrics") is None, "/x/* matches below /x only"
    assert matched(carol, "GET", "/metrics/slis") is None, "subject"


def test_distinguishers() -> None:
    info = parse("GET", "/api/v1/namespaces/ns1/pods", {})
    alice = user("alice")
    rule = {"subjects": ANYONE, "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}
    assert classify.distinguisher(schema("u", 5, rule, "ByUser"), alice, info) == "alice"
    assert classify.distinguisher(schema("n", 5, rule, "ByNamespace"), alice, info) == "ns1"
    exempt = bootstrap.MANDATORY_SCHEMAS[0]
    assert classify.distinguisher(exempt, alice, info) == ""
