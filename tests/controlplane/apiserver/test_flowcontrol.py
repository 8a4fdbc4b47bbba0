"""API Priority and Fairness against a real API server process, through kubectl, the Python
client and plain HTTPS: upstream's bootstrap configuration with its columns, the response
headers, an overloaded priority level answering 429 while other levels are served, the debug
dumps, metrics, live configuration changes, Dangling conditions, mandatory objects restored,
and invalid objects refused."""

from __future__ import annotations

import asyncio
import functools
import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import aiohttp
import kubernetes.client as k8s
import pytest

from tests.controlplane.apiserver.corpus import columns, refusal, refused_document
from tests.controlplane.apiserver.inprocess import admin_ssl
from tests.servers import BARE_APISERVER, Kubectl, ServerProcess, start_server, stop_server

# Two seats in all, so a level of one share gets exactly one; RBAC, for the debug endpoints'
# authorization.
FLAGS = (
    *("--max-requests-inflight", "1", "--max-mutating-requests-inflight", "1"),
    *("--authorization-mode", "RBAC"),
)
SUGGESTED_SCHEMAS = [
    "catch-all",
    "endpoint-controller",
    "exempt",
    "global-default",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-system-service-accounts",
    "probes",
    "service-accounts",
    "system-leader-election",
    "system-node-high",
    "system-nodes",
    "workload-leader-election",
]
SLOW_LANE = """
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata:
  name: slow-lane
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    borrowingLimitPercent: 0
    limitResponse:
      type: Queue
      queuing:
        queues: 1
        handSize: 1
        queueLengthLimit: 1
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata:
  name: slow-lane
spec:
  matchingPrecedence: 500
  priorityLevelConfiguration:
    name: slow-lane
  distinguisherMethod:
    type: ByUser
  rules:
    - subjects:
        - kind: User
          user:
            name: slowpoke
      resourceRules:
        - verbs: ["*"]
          apiGroups: [""]
          resources: ["configmaps"]
          namespaces: ["*"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: configmap-reader
rules:
  - apiGroups: [""]
    resources: ["configmaps"]
    verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: configmap-readers
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: configmap-reader
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: User, name: slowpoke}
  - {apiGroup: rbac.authorization.k8s.io, kind: User, name: bystander}
"""


@pytest.fixture(scope="module")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data_dir = tmp_path_factory.mktemp("apf") / "data"
    data_dir.mkdir()
    server = start_server(data_dir, *BARE_APISERVER, *FLAGS)
    try:
        yield server
    finally:
        stop_server(server)


def flow_schema(name: str, level: str, rule: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": name},
        "spec": {"priorityLevelConfiguration": {"name": level}, "rules": [rule]},
    }


def _exists(kubectl: Kubectl, resource: str, name: str) -> bool:
    return kubectl.run("get", resource, name, check=False, namespaced=False).returncode == 0


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.2)


def test_bootstrap_configuration_with_upstreams_columns(kubectl: Kubectl) -> None:
    schemas = columns(kubectl.run("get", "flowschemas", namespaced=False).stdout)
    assert " ".join(schemas[0]) == (
        "NAME PRIORITYLEVEL MATCHINGPRECEDENCE DISTINGUISHERMETHOD AGE MISSINGPL"
    )
    rows = {row[0]: row for row in schemas[1:]}
    assert set(SUGGESTED_SCHEMAS) <= set(rows)
    assert rows["exempt"][1:4] == ["exempt", "1", "*"]
    assert rows["global-default"][1:4] == ["global-default", "9900", "ByUser"]
    assert rows["kube-scheduler"][1:4] == ["workload-high", "800", "ByNamespace"]
    eventually(
        lambda: all(
            row[5] == "False"
            for row in columns(kubectl.run("get", "flowschemas", namespaced=False).stdout)[1:]
            if row[0] in SUGGESTED_SCHEMAS
        )
    )
    levels = columns(kubectl.run("get", "prioritylevelconfigurations", namespaced=False).stdout)
    assert " ".join(levels[0]) == (
        "NAME TYPE NOMINALCONCURRENCYSHARES QUEUES HANDSIZE QUEUELENGTHLIMIT AGE"
    )
    cells = {row[0]: row[1:6] for row in levels[1:]}
    assert cells["exempt"] == ["Exempt", "<none>", "<none>", "<none>", "<none>"]
    assert cells["catch-all"] == ["Limited", "5", "<none>", "<none>", "<none>"]
    assert cells["system"] == ["Limited", "30", "64", "6", "50"]
    assert cells["node-high"] == ["Limited", "40", "64", "6", "50"]
    assert cells["leader-election"] == ["Limited", "10", "16", "4", "50"]
    assert cells["workload-high"] == ["Limited", "40", "128", "6", "50"]
    assert cells["workload-low"] == ["Limited", "100", "128", "6", "50"]
    assert cells["global-default"] == ["Limited", "20", "128", "6", "50"]
    suggested = kubectl.json("get", "prioritylevelconfiguration", "workload-low")
    assert suggested["metadata"]["annotations"] == {"apf.kubernetes.io/autoupdate-spec": "true"}
    assert suggested["spec"]["limited"]["lendablePercent"] == 90


def test_responses_name_the_schema_and_level(kubectl: Kubectl) -> None:
    exempt_fs = kubectl.json("get", "flowschema", "exempt")
    exempt_pl = kubectl.json("get", "prioritylevelconfiguration", "exempt")
    verbose = kubectl.run("get", "namespaces", "-v=8", namespaced=False).stderr
    assert f"X-Kubernetes-Pf-Flowschema-Uid: {exempt_fs['metadata']['uid']}" in verbose
    assert f"X-Kubernetes-Pf-Prioritylevel-Uid: {exempt_pl['metadata']['uid']}" in verbose


def test_python_client(api_client: k8s.ApiClient) -> None:
    api = k8s.FlowcontrolApiserverV1Api(api_client)
    names = {fs.metadata.name for fs in api.list_flow_schema().items}
    assert set(SUGGESTED_SCHEMAS) <= names
    _, status, headers = api.read_flow_schema_with_http_info("global-default")
    assert status == 200 and headers["X-Kubernetes-PF-FlowSchema-UID"]
    level = api.create_priority_level_configuration(
        k8s.V1PriorityLevelConfiguration(
            metadata=k8s.V1ObjectMeta(name="py-level"),
            spec=k8s.V1PriorityLevelConfigurationSpec(
                type="Limited",
                limited=k8s.V1LimitedPriorityLevelConfiguration(
                    limit_response=k8s.V1LimitResponse(
                        type="Queue", queuing=k8s.V1QueuingConfiguration()
                    )
                ),
            ),
        )
    )
    limited = level.spec.limited
    assert (limited.nominal_concurrency_shares, limited.lendable_percent) == (30, 0)
    queuing = limited.limit_response.queuing
    assert (queuing.queues, queuing.hand_size, queuing.queue_length_limit) == (64, 8, 50)
    patched = api.patch_priority_level_configuration(
        "py-level", {"spec": {"limited": {"nominalConcurrencyShares": 7}}}
    )
    assert patched.spec.limited.nominal_concurrency_shares == 7
    with pytest.raises(k8s.ApiException) as refused:
        api.patch_priority_level_configuration(
            "py-level", {"spec": {"limited": {"lendablePercent": 150}}}
        )
    assert refused.value.status == 422
    assert "spec.limited.lendablePercent" in json.loads(refused.value.body)["message"]
    api.delete_priority_level_configuration("py-level")


def apply_slow_lane(kubectl: Kubectl) -> dict[str, Any]:
    """Apply slowpoke's FlowSchema and level; once the server routes by them, the schema."""
    kubectl.run("apply", "-f", "-", input=SLOW_LANE, namespaced=False)
    dump = ("get", "--raw", "/debug/api_priority_and_fairness/dump_priority_levels")
    eventually(lambda: "slow-lane," in kubectl.run(*dump, namespaced=False).stdout)
    return kubectl.json("get", "flowschema", "slow-lane")


def _session(apiserver: ServerProcess) -> aiohttp.ClientSession:
    """An admin session (which may impersonate) to the server."""
    connector = aiohttp.TCPConnector(ssl=admin_ssl(apiserver.data_dir))
    return aiohttp.ClientSession(apiserver.url, connector=connector)


async def _get(
    session: aiohttp.ClientSession, path: str, user: str | None = None
) -> tuple[int, dict[str, str], str]:
    headers = {"Impersonate-User": user} if user else {}
    async with session.get(path, headers=headers) as response:
        return response.status, dict(response.headers), await response.text()


def test_an_overloaded_level_answers_429_while_others_are_served(
    apiserver: ServerProcess, kubectl: Kubectl
) -> None:
    """slowpoke's level has one seat (and borrows none), one queue of one: of six slow
    requests one runs, one waits, four are refused at once; a user at another level is served
    meanwhile.  The slow
    requests are lists at a resourceVersion the server has not reached: the server holds each
    until its watch cache gives up (upstream's 504 "Too large resource version")."""
    fs = apply_slow_lane(kubectl)

    async def scenario() -> None:
        async with _session(apiserver) as session:
            slow = "/api/v1/namespaces/default/configmaps?resourceVersion=999999999"
            requests = [asyncio.create_task(_get(session, slow, "slowpoke")) for _ in range(6)]
            await asyncio.sleep(1.0)
            other = await _get(session, "/api/v1/namespaces/default/configmaps", "bystander")
            assert other[0] == 200, "another level is served"
            _, _, levels = await _get(
                session, "/debug/api_priority_and_fairness/dump_priority_levels"
            )
            _, _, waiting = await _get(
                session, "/debug/api_priority_and_fairness/dump_requests?includeRequestDetails=1"
            )
            results = await asyncio.gather(*requests)
            _, _, metrics = await _get(session, "/metrics")

        refused = [r for r in results if r[0] == 429]
        assert sorted(r[0] for r in results) == [429, 429, 429, 429, 504, 504]
        for _, headers, body in refused:
            assert headers["Retry-After"] == "1"
            assert headers["X-Kubernetes-PF-FlowSchema-UID"] == fs["metadata"]["uid"]
            assert json.loads(body)["message"] == "Too many requests, please try again later."
        row = next(line.split() for line in levels.splitlines() if line.startswith("slow-lane,"))
        assert row[4:6] == ["1,", "1,"], "one waiting, one executing"
        assert levels.splitlines()[0].split() == [
            "PriorityLevelName,",
            "ActiveQueues,",
            "IsIdle,",
            "IsQuiescing,",
            "WaitingRequests,",
            "ExecutingRequests,",
            "DispatchedRequests,",
            "RejectedRequests,",
            "TimedoutRequests,",
            "CancelledRequests",
        ]
        waiting_rows = [line.split() for line in waiting.splitlines()[1:]]
        assert [(r[0], r[1], r[4]) for r in waiting_rows] == [
            ("slow-lane,", "slow-lane,", "slowpoke,")
        ]
        assert (
            "slowpoke," in waiting_rows[0]
            and "/api/v1/namespaces/default/configmaps," in waiting_rows[0]
        )
        assert (
            'apiserver_flowcontrol_rejected_requests_total{priority_level="slow-lane",'
            'flow_schema="slow-lane",reason="queue-full"} 4'
        ) in metrics

    asyncio.run(scenario())


def test_watches_hold_a_seat_only_while_set_up(apiserver: ServerProcess, kubectl: Kubectl) -> None:
    """slowpoke's level has one seat and one queue of one, yet four watches stay open at
    once and a list still gets through: each watch gave its seat back as its response began."""
    apply_slow_lane(kubectl)

    async def scenario() -> None:
        async with _session(apiserver) as session:
            # Opened together, well before the server ends them (after 3 s); read to their end
            # so that every connection closes cleanly.
            watch = "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=3"
            headers = {"Impersonate-User": "slowpoke"}
            opening = [session.get(watch, headers=headers) for _ in range(4)]
            watches = await asyncio.wait_for(asyncio.gather(*opening), 2)
            assert [w.status for w in watches] == [200] * 4
            status, _, _ = await _get(session, "/api/v1/namespaces/default/configmaps", "slowpoke")
            assert status == 200
            for w in watches:
                await w.read()
                w.release()

    asyncio.run(scenario())


def test_a_change_many_watches_see_takes_more_seats(
    apiserver: ServerProcess, kubectl: Kubectl
) -> None:
    """With 25 watches on configmaps in a namespace (bystander's, at another level), a
    configmap created there is estimated at 3 seats (one per 10 watches), as upstream's
    mutating work estimator; the estimate is in apiserver_flowcontrol_work_estimated_seats
    (slowpoke may not create configmaps: the seats are taken before authorization)."""
    apply_slow_lane(kubectl)
    bucket = (
        'apiserver_flowcontrol_work_estimated_seats_bucket{priority_level="slow-lane",'
        'flow_schema="slow-lane",le="%s"} (\\d+)'
    )

    def wide(metrics: str) -> int:
        """Requests estimated at 3 or 4 seats."""
        two, four = (re.search(bucket % le, metrics) for le in ("2", "4"))
        return int(four.group(1)) - int(two.group(1)) if two and four else 0

    async def scenario() -> None:
        async with _session(apiserver) as session:
            _, _, before = await _get(session, "/metrics")
            watch = "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=3"
            headers = {"Impersonate-User": "bystander"}
            watches = await asyncio.gather(
                *(session.get(watch, headers=headers) for _ in range(25))
            )
            assert [w.status for w in watches] == [200] * 25
            created = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "seen"}}
            async with session.post(
                "/api/v1/namespaces/default/configmaps",
                json=created,
                headers={"Impersonate-User": "slowpoke"},
            ) as response:
                assert response.status == 403
            _, _, after = await _get(session, "/metrics")
            for w in watches:
                await w.read()
                w.release()
        assert wide(after) - wide(before) == 1

    asyncio.run(scenario())


def test_dangling_and_live_changes(kubectl: Kubectl) -> None:
    orphan = flow_schema(
        "orphan",
        "nowhere",
        {
            "subjects": [{"kind": "User", "user": {"name": "x"}}],
            "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/version"]}],
        },
    )
    kubectl.run("create", "-f", "-", input=json.dumps(orphan), namespaced=False)

    def dangling() -> dict[str, Any]:
        status = kubectl.json("get", "flowschema", "orphan").get("status", {})
        found: dict[str, Any] = next(
            (c for c in status.get("conditions", []) if c["type"] == "Dangling"), {}
        )
        return found

    eventually(lambda: dangling().get("status") == "True")
    assert dangling()["reason"] == "NotFound"
    assert dangling()["message"] == (
        'This FlowSchema references the PriorityLevelConfiguration object named "nowhere" but '
        "there is no such object"
    )
    level = {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": "nowhere"},
        "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Reject"}}},
    }
    kubectl.run("create", "-f", "-", input=json.dumps(level), namespaced=False)
    eventually(lambda: dangling().get("status") == "False")
    assert dangling()["reason"] == "Found"
    dump = kubectl.run(
        "get", "--raw", "/debug/api_priority_and_fairness/dump_queues", namespaced=False
    ).stdout
    assert dump.splitlines()[0].split() == [
        "PriorityLevelName,",
        "Index,",
        "PendingRequests,",
        "ExecutingRequests,",
        "SeatsInUse,",
        "NextDispatchR,",
        "InitialSeatsSum,",
        "MaxSeatsSum,",
        "TotalWorkSum",
    ]
    assert any(line.startswith("global-default,") for line in dump.splitlines())


def test_mandatory_objects_are_fixed_and_restored(kubectl: Kubectl) -> None:
    refused = kubectl.run(
        "patch",
        "prioritylevelconfiguration",
        "catch-all",
        "--type=merge",
        "-p",
        '{"spec":{"limited":{"nominalConcurrencyShares":50}}}',
        check=False,
        namespaced=False,
    )
    assert refused.returncode == 1
    assert "spec of 'catch-all' must equal the fixed value" in refused.stderr
    kubectl.run("delete", "flowschema", "catch-all", namespaced=False)
    kubectl.run("delete", "prioritylevelconfiguration", "catch-all", namespaced=False)
    for resource in ("flowschema", "prioritylevelconfiguration"):
        eventually(functools.partial(_exists, kubectl, resource, "catch-all"))


def test_invalid_objects_are_refused(kubectl: Kubectl) -> None:
    assert (
        "spec.limited.limitResponse.queuing.handSize: Invalid value: 9: should not be greater "
        "than queues (4)"
    ) in refusal(kubectl, "flowcontrol-prioritylevel-hand-larger-than-deck.yaml")
    assert "only the schema named 'exempt' may have matchingPrecedence 1" in refusal(
        kubectl, "flowcontrol-flowschema-precedence-one.yaml"
    )
    bad_subject = flow_schema(
        "bad",
        "global-default",
        {
            "subjects": [{"kind": "ServiceAccount", "serviceAccount": {"name": "x"}}],
            "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}],
        },
    )
    message = refused_document(kubectl, bad_subject)
    assert 'The FlowSchema "bad" is invalid' in message
    assert (
        "spec.rules[0].subjects[0].serviceAccount.namespace: Required value: must specify "
        "namespace for service account"
    ) in message
    assert "spec.rules[0].resourceRules[0].namespaces: Required value" in message


@pytest.mark.parametrize(
    "who",
    [
        pytest.param(("alice",), id="user"),
        pytest.param(("prometheus", "system:monitoring"), id="monitoring"),
    ],
)
def test_debug_dumps_are_for_cluster_admins(kubectl: Kubectl, who: tuple[str, ...]) -> None:
    """Non-resource URLs that RBAC's bootstrap roles grant only through cluster-admin."""
    path = "/debug/api_priority_and_fairness/dump_priority_levels"
    impersonation = ["--as", who[0], *(f"--as-group={group}" for group in who[1:])]
    refused = kubectl.run("get", "--raw", path, *impersonation, check=False, namespaced=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f'Error from server (Forbidden): forbidden: User "{who[0]}" cannot get path "{path}"'
    )


def test_explain(kubectl: Kubectl) -> None:
    explained = kubectl.run(
        "explain", "flowschema.spec.distinguisherMethod", namespaced=False
    ).stdout
    assert "ByUser" in explained
    explained = kubectl.run(
        "explain", "prioritylevelconfiguration.spec.limited", namespaced=False
    ).stdout
    assert "nominalConcurrencyShares" in explained
