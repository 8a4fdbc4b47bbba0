"""Audit logging: the policy's rules and levels, the events a real server writes for each
stage (with the Audit-Id header naming them), impersonation, managedFields left out, and the
log rotated by size."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from controlplane.apiserver.auth import User
from controlplane.apiserver.endpoints.audit import (
    GroupResources,
    LogWriter,
    Policy,
    PolicyError,
    Rule,
    load_policy,
)
from controlplane.apiserver.endpoints.requestinfo import parse
from controlplane.storage.sqlite import SQLiteStore
from tests.controlplane.apiserver.inprocess import serving

POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [{omit}]
omitManagedFields: true
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*"]
- level: None
  users: ["system:apiserver"]
- level: Metadata
  resources: [{{group: "", resources: [secrets]}}]
- level: RequestResponse
  resources: [{{group: "", resources: [configmaps]}}]
  namespaces: [audited]
- level: Request
  verbs: [create, update, patch]
- level: Metadata
"""

ALICE = User("alice", ("devs", "system:authenticated"))


def decide(policy: Policy, method: str, path: str, user: User = ALICE) -> str:
    info = parse(method, path, {})
    return policy.decide(user, info)[0]


def test_the_first_matching_rule_sets_the_level(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY.format(omit=""))
    policy = load_policy(path)
    assert decide(policy, "GET", "/healthz") == "None"
    assert decide(policy, "GET", "/healthz/etcd") == "None"
    assert decide(policy, "GET", "/version") == "Metadata"
    assert decide(policy, "GET", "/api/v1/pods", User("system:apiserver", ())) == "None"
    assert decide(policy, "POST", "/api/v1/namespaces/x/secrets") == "Metadata"
    assert decide(policy, "GET", "/api/v1/namespaces/audited/configmaps/c") == "RequestResponse"
    assert decide(policy, "GET", "/api/v1/namespaces/other/configmaps/c") == "Metadata"
    assert decide(policy, "POST", "/apis/apps/v1/namespaces/x/deployments") == "Request"
    assert decide(policy, "GET", "/apis/apps/v1/namespaces/x/deployments") == "Metadata"


@pytest.mark.parametrize(
    ("rule", "method", "path", "matches"),
    [
        pytest.param(Rule("Metadata", users=("alice",)), "GET", "/api/v1/pods", True, id="user"),
        pytest.param(Rule("Metadata", users=("bob",)), "GET", "/api/v1/pods", False, id="other"),
        pytest.param(Rule("Metadata", user_groups=("devs",)), "GET", "/api", True, id="group"),
        pytest.param(
            Rule("Metadata", resources=(GroupResources("", ("pods/log",)),)),
            "GET",
            "/api/v1/namespaces/n/pods/p/log",
            True,
            id="subresource",
        ),
        pytest.param(
            Rule("Metadata", resources=(GroupResources("", ("pods",)),)),
            "GET",
            "/api/v1/namespaces/n/pods/p/log",
            False,
            id="not-the-subresource",
        ),
        pytest.param(
            Rule("Metadata", resources=(GroupResources("", ("*/status",)),)),
            "PUT",
            "/api/v1/namespaces/n/pods/p/status",
            True,
            id="any-status",
        ),
        pytest.param(
            Rule("Metadata", resources=(GroupResources("apps", (), ("web",)),)),
            "GET",
            "/apis/apps/v1/namespaces/n/deployments/web",
            True,
            id="resource-name",
        ),
        pytest.param(
            Rule("Metadata", resources=(GroupResources("apps", (), ("web",)),)),
            "GET",
            "/apis/apps/v1/namespaces/n/deployments/db",
            False,
            id="other-name",
        ),
        pytest.param(
            Rule("Metadata", non_resource_urls=("/api",)), "GET", "/api/v1/pods", False, id="url"
        ),
        pytest.param(
            Rule("Metadata", namespaces=("n",)), "GET", "/version", False, id="namespace-only"
        ),
        pytest.param(
            Rule("Metadata", namespaces=("",)), "GET", "/api/v1/nodes", True, id="cluster-scope"
        ),
    ],
)
def test_rule_matching(rule: Rule, method: str, path: str, matches: bool) -> None:
    assert rule.matches(ALICE, parse(method, path, {})) is matches


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("kind: Policy\napiVersion: v1\n", "apiVersion audit.k8s.io/v1", id="version"),
        pytest.param(
            "kind: Policy\napiVersion: audit.k8s.io/v1\nrules: [{level: Everything}]\n",
            "'Everything' is not one of",
            id="level",
        ),
        pytest.param(
            "kind: Policy\napiVersion: audit.k8s.io/v1\nomitStages: [Later]\n",
            "unknown stage 'Later'",
            id="stage",
        ),
        pytest.param(
            "kind: Policy\napiVersion: audit.k8s.io/v1\nrules: [{level: None, "
            "nonResourceURLs: [/x], resources: [{group: ''}]}]\n",
            "cannot be mixed",
            id="mixed",
        ),
    ],
)
def test_bad_policies_are_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    with pytest.raises(PolicyError, match=message):
        load_policy(path)


def test_the_log_rotates_by_size(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    writer = LogWriter(path, max_size=100, max_backups=2)
    for number in range(10):
        writer.write(f'{{"n": {number}, "pad": "{"x" * 30}"}}\n'.encode())
    writer.close()
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert kept == ["audit.log", "audit.log.1", "audit.log.2"]
    newest = [json.loads(line)["n"] for line in path.read_text().splitlines()]
    assert newest == [8, 9]
    assert all(p.stat().st_size <= 100 for p in tmp_path.iterdir())


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_a_server_writes_events_per_stage(tmp_path: Path) -> None:
    policy_path = tmp_path / "policy.yaml"
    policy_path.write_text(POLICY.format(omit=""))
    log_path = tmp_path / "logs" / "audit.log"
    store = await SQLiteStore.open(tmp_path / "state.db")
    headers: dict[str, str] = {}
    try:
        async with serving(
            store,
            tmp_path / "data",
            audit_policy=load_policy(policy_path),
            audit_log_path=str(log_path),
        ) as (_, session):
            log_path.write_text("")  # forget the bootstrap's own requests (none go over HTTP)
            async with session.post(
                "/api/v1/namespaces", json={"metadata": {"name": "audited"}}
            ) as answer:
                assert answer.status == 201
            body = {"metadata": {"name": "settings"}, "data": {"color": "blue"}}
            async with session.post(
                "/api/v1/namespaces/audited/configmaps",
                json=body,
                headers={"User-Agent": "audit-test/1"},
            ) as answer:
                assert answer.status == 201
                headers["create"] = answer.headers["Audit-Id"]
            secret = {"metadata": {"name": "s"}, "stringData": {"password": "hunter2"}}
            async with session.post("/api/v1/namespaces/audited/secrets", json=secret) as answer:
                assert answer.status == 201
                headers["secret"] = answer.headers["Audit-Id"]
            async with session.get("/healthz") as answer:
                assert answer.status == 200
                headers["health"] = answer.headers["Audit-Id"]
            async with session.get("/api/v1/namespaces/audited/configmaps/missing") as answer:
                assert answer.status == 404
                headers["missing"] = answer.headers["Audit-Id"]
            async with session.get(
                "/api/v1/namespaces/audited/pods", headers={"Impersonate-User": "bob"}
            ) as answer:
                assert answer.status == 200
                headers["bob"] = answer.headers["Audit-Id"]
            async with session.get(
                "/api/v1/namespaces/audited/configmaps?watch=1&timeoutSeconds=1"
            ) as answer:
                headers["watch"] = answer.headers["Audit-Id"]
                await asyncio.wait_for(answer.read(), 10)
    finally:
        await store.close()

    by_id: dict[str, list[dict[str, Any]]] = {}
    for event in events(log_path):
        assert (event["kind"], event["apiVersion"]) == ("Event", "audit.k8s.io/v1")
        by_id.setdefault(event["auditID"], []).append(event)

    received, complete = by_id[headers["create"]]
    assert [received["stage"], complete["stage"]] == ["RequestReceived", "ResponseComplete"]
    assert complete["level"] == "RequestResponse"
    assert complete["verb"] == "create"
    assert complete["requestURI"] == "/api/v1/namespaces/audited/configmaps"
    assert complete["userAgent"] == "audit-test/1"
    assert complete["sourceIPs"] == ["127.0.0.1"]
    assert "system:masters" in complete["user"]["groups"]
    # As upstream's, a create's objectRef is completed from its request object.
    assert received["objectRef"] == {
        "resource": "configmaps",
        "namespace": "audited",
        "apiVersion": "v1",
    }
    assert complete["objectRef"] == {
        "resource": "configmaps",
        "namespace": "audited",
        "name": "settings",
        "apiVersion": "v1",
    }
    assert complete["responseStatus"]["code"] == 201
    assert complete["requestObject"]["data"] == {"color": "blue"}
    assert complete["responseObject"]["metadata"]["name"] == "settings"
    assert "managedFields" not in complete["responseObject"]["metadata"]
    assert complete["annotations"]["authorization.k8s.io/decision"] == "allow"
    assert received["requestReceivedTimestamp"] == complete["requestReceivedTimestamp"]
    assert complete["stageTimestamp"] >= complete["requestReceivedTimestamp"]

    secret_events = by_id[headers["secret"]]
    assert {e["level"] for e in secret_events} == {"Metadata"}
    assert not any("requestObject" in e or "responseObject" in e for e in secret_events)
    assert all("hunter2" not in json.dumps(e) for e in secret_events)
    assert secret_events[-1]["objectRef"]["name"] == "s"  # at Metadata level too

    assert headers["health"] not in by_id, "level None writes nothing"

    missing = by_id[headers["missing"]][-1]
    assert missing["responseStatus"]["code"] == 404
    assert missing["responseStatus"]["reason"] == "NotFound"

    bob = by_id[headers["bob"]][-1]
    assert bob["impersonatedUser"]["username"] == "bob"
    assert bob["user"]["username"] != "bob"

    stages = [e["stage"] for e in by_id[headers["watch"]]]
    assert stages == ["RequestReceived", "ResponseStarted", "ResponseComplete"]


async def test_omitted_stages_are_not_written(tmp_path: Path) -> None:
    policy_path = tmp_path / "policy.yaml"
    policy_path.write_text(POLICY.format(omit="RequestReceived"))
    log_path = tmp_path / "audit.log"
    store = await SQLiteStore.open(tmp_path / "state.db")
    try:
        async with (
            serving(
                store,
                tmp_path / "data",
                audit_policy=load_policy(policy_path),
                audit_log_path=str(log_path),
            ) as (_, session),
            session.get("/api/v1/namespaces/default") as answer,
        ):
            assert answer.status == 200
            audit_id = answer.headers["Audit-Id"]
    finally:
        await store.close()
    written = [e for e in events(log_path) if e["auditID"] == audit_id]
    assert [e["stage"] for e in written] == ["ResponseComplete"]
