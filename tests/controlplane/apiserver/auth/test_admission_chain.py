"""Admission as one chain, through the API: every mutating step before any validating one (so
a mutating webhook's change meets PodSecurity, LimitRanger and ResourceQuota), reinvocation,
the audit annotations admission leaves (PodSecurity's audit mode, webhooks'
``auditAnnotations``), and webhooks' ``matchConditions`` and ``matchPolicy``.  The webhooks
are the HTTPS ones of ``webhook_servers``; the server logs every pod, configmap and custom
resource request at Metadata level.  The first tests run the chain alone, without a
server."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.apiserver import errors
from controlplane.apiserver.auth.admission import Plugin, always_pull_images, chain
from controlplane.apiserver.auth.admission import mutating as mutating_step
from controlplane.apiserver.auth.admission.webhook import Reinvocation
from controlplane.apiserver.registry.store import Admission
from controlplane.apiserver.registry.store import RequestContext as Context
from kube.api.kinds.admissionregistration_v1 import (
    MatchCondition,
    MutatingWebhook,
    MutatingWebhookConfiguration,
    RuleWithOperations,
    ValidatingWebhook,
    ValidatingWebhookConfiguration,
)
from kube.api.kinds.core_v1.cluster import (
    ConfigMap,
    LimitRange,
    LimitRangeItem,
    LimitRangeSpec,
    Namespace,
    ResourceQuota,
    ResourceQuotaSpec,
    ResourceQuotaStatus,
)
from kube.api.kinds.core_v1.pod import (
    Capabilities,
    Container,
    Pod,
    PodSpec,
    ResourceRequirements,
    SeccompProfile,
    SecurityContext,
)
from kube.api.meta_v1 import LabelSelector, ObjectMeta, Resource
from kube.api.scheme import KindInfo
from kube.client.errors import ApiError
from kube.client.rest import Client
from tests.controlplane.apiserver.admission_servers import BACKENDS, serve
from tests.controlplane.apiserver.webhook_servers import (
    Answer,
    Configure,
    Webhooks,
    configure_fixture,  # noqa: F401 (fixture)
    denied,
    patched,
    rules,
    selected,
    webhook,
    webhooks_fixture,  # noqa: F401 (fixture)
)
from tests.servers import ServerProcess


async def test_every_mutation_runs_before_any_validation() -> None:
    """Upstream's order, by halves; the server's own checks before the webhooks and quota."""
    ran: list[str] = []
    admit = chain(
        {
            "NamespaceLifecycle": Plugin(mutating_step(recorded("lifecycle", ran))),
            "LimitRanger": Plugin(
                mutating_step(recorded("limits: defaults", ran)), recorded("limits: bounds", ran)
            ),
            "PodSecurity": Plugin(validate=recorded("podsecurity", ran)),
            "MutatingAdmissionWebhook": Plugin(mutating_step(recorded("webhooks: mutate", ran))),
            "ValidatingAdmissionWebhook": Plugin(validate=recorded("webhooks: validate", ran)),
            "ResourceQuota": Plugin(validate=recorded("quota", ran)),
        },
        [recorded("escalation", ran)],
    )
    await admit("CREATE", ConfigMap.kind_info, ConfigMap(metadata=ObjectMeta()), None, Context())
    assert ran == [
        "lifecycle",
        "limits: defaults",
        "webhooks: mutate",
        "limits: bounds",
        "podsecurity",
        "escalation",
        "webhooks: validate",
        "quota",
    ]


async def test_a_webhook_change_reinvokes_every_mutation_once() -> None:
    ran: list[str] = []

    async def changing(
        operation: str,
        info: KindInfo,
        obj: Resource,
        old: Resource | None,
        ctx: Context,
        rounds: Reinvocation,
    ) -> None:
        ran.append(f"webhook, again: {rounds.again}")
        rounds.wanted = True

    admit = chain(
        {
            "LimitRanger": Plugin(mutating_step(recorded("limits", ran))),
            "MutatingAdmissionWebhook": Plugin(changing),
            "ResourceQuota": Plugin(validate=recorded("quota", ran)),
        }
    )
    await admit("CREATE", ConfigMap.kind_info, ConfigMap(metadata=ObjectMeta()), None, Context())
    assert ran == ["limits", "webhook, again: False", "limits", "webhook, again: True", "quota"]


def recorded(name: str, ran: list[str]) -> Admission:
    async def step(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: Context
    ) -> None:
        ran.append(name)

    return step


async def test_always_pull_images_checks_what_webhooks_left() -> None:
    admit, validate = always_pull_images()
    made = Pod(
        metadata=ObjectMeta(name="p"), spec=PodSpec(containers=[Container(name="a", image="x")])
    )
    assert made.spec is not None and made.spec.containers
    await admit("CREATE", Pod.kind_info, made, None, Context())
    assert made.spec.containers[0].image_pull_policy == "Always"
    await validate("CREATE", Pod.kind_info, made, None, Context())
    made.spec.containers[0].image_pull_policy = "IfNotPresent"  # as a mutating webhook may
    with pytest.raises(errors.ApiError) as refused:
        await validate("CREATE", Pod.kind_info, made, None, Context())
    assert refused.value.code == 403
    assert str(refused.value) == (
        'pods "p" is forbidden: spec.containers[0].imagePullPolicy: Unsupported value: '
        '"IfNotPresent": supported values: "Always"'
    )


AUDIT_POLICY = """
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: Metadata
  resources:
  - group: ""
    resources: ["pods", "configmaps"]
  - group: example.com
"""


@pytest.fixture(scope="module")
def audit_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("audit") / "audit.log"


@pytest.fixture(scope="module", params=BACKENDS)
def apiserver(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, audit_log: Path
) -> Iterator[ServerProcess]:
    policy = audit_log.with_name("policy.yaml")
    policy.write_text(AUDIT_POLICY)
    yield from serve(
        request.param,
        tmp_path_factory,
        "--disable-admission-plugins",
        "ServiceAccount",
        "--audit-policy-file",
        str(policy),
        "--audit-log-path",
        str(audit_log),
    )


def creates(log: Path, namespace: str, resource: str) -> list[dict[str, Any]]:
    """The ResponseComplete events of the logged creates (not dry runs) of a ``resource`` in
    ``namespace``."""
    lines = log.read_text().splitlines() if log.exists() else []
    return [
        event
        for event in map(json.loads, lines)
        if event["stage"] == "ResponseComplete"
        and event["verb"] == "create"
        and "dryRun" not in event["requestURI"]
        and event.get("objectRef", {}).get("namespace") == namespace
        and event["objectRef"].get("resource") == resource
    ]


async def annotations_of(log: Path, namespace: str, resource: str) -> dict[str, str]:
    """The annotations of the last logged create of a ``resource`` in ``namespace``, once its
    event is written."""
    for _ in range(100):
        found = await asyncio.to_thread(creates, log, namespace, resource)
        if found:
            annotations: dict[str, str] = found[-1].get("annotations", {})
            return annotations
        await asyncio.sleep(0.05)
    raise AssertionError(f"no audit event for a create of {resource} in {namespace}")


async def label(client: Client, namespace: str, **labels: str) -> None:
    current = await client.get(Namespace, namespace)
    current.metadata.labels = {**(current.metadata.labels or {}), **labels}
    await client.update(current)


def restricted_pod(namespace: str, name: str, cpu: str | None = None) -> Pod:
    """A pod the restricted standard admits."""
    resources = ResourceRequirements(requests={"cpu": cpu}, limits={"cpu": cpu}) if cpu else None
    return Pod(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec=PodSpec(
            containers=[
                Container(
                    name="app",
                    image="app",
                    resources=resources,
                    security_context=SecurityContext(
                        run_as_non_root=True,
                        allow_privilege_escalation=False,
                        capabilities=Capabilities(drop=["ALL"]),
                        seccomp_profile=SeccompProfile(type="RuntimeDefault"),
                    ),
                )
            ]
        ),
    )


def mutating(
    name: str, hooks: Webhooks, path: str, selector: LabelSelector, **fields: Any
) -> MutatingWebhook:
    """A mutating webhook for pods and configmaps (unless ``fields`` give other ``rules``)."""
    fields.setdefault("rules", rules("pods", "configmaps"))
    return webhook(MutatingWebhook, name, hooks, path, selector, **fields)


def pods_only(patch: Callable[[dict[str, Any]], list[dict[str, Any]]]) -> Answer:
    """An answer patching pods (``patch`` of the request), leaving anything else as it is."""
    return lambda asked: patched(patch(asked)) if asked["kind"]["kind"] == "Pod" else {}


async def test_podsecurity_checks_what_a_mutating_webhook_made(
    client: Client, namespace: str, webhooks: Webhooks, audit_log: Path, configure: Configure
) -> None:
    await label(client, namespace, **{"pod-security.kubernetes.io/enforce": "restricted"})
    webhooks.answers["/privileged"] = pods_only(
        lambda asked: [
            {"op": "add", "path": "/spec/containers/0/securityContext/privileged", "value": True}
        ]
    )
    configuration = MutatingWebhookConfiguration(
        metadata=ObjectMeta(name=namespace),
        webhooks=[
            mutating(
                "privileged.example.com",
                webhooks,
                "/privileged",
                await selected(client, namespace),
            )
        ],
    )
    await configure(configuration)
    with pytest.raises(ApiError) as refused:
        await client.create(restricted_pod(namespace, "made-privileged"))
    assert refused.value.code == 403
    assert refused.value.message == (
        'pods "made-privileged" is forbidden: violates PodSecurity "restricted:latest": '
        'privileged (container "app" must not set securityContext.privileged=true)'
    )
    assert webhooks.called("/privileged") == 1
    annotations = await annotations_of(audit_log, namespace, "pods")
    assert annotations["pod-security.kubernetes.io/enforce-policy"] == "restricted:latest"


async def test_limitranger_defaults_what_a_webhook_removed(
    client: Client, namespace: str, webhooks: Webhooks, configure: Configure
) -> None:
    await client.create(
        LimitRange(
            metadata=ObjectMeta(name="defaults", namespace=namespace),
            spec=LimitRangeSpec(
                limits=[
                    LimitRangeItem(
                        type="Container",
                        default={"cpu": "300m"},
                        default_request={"cpu": "100m"},
                        max={"cpu": "1"},
                    )
                ]
            ),
        )
    )
    webhooks.answers["/strip"] = pods_only(
        lambda asked: [{"op": "remove", "path": "/spec/containers/0/resources"}]
    )
    configuration = MutatingWebhookConfiguration(
        metadata=ObjectMeta(name=namespace),
        webhooks=[
            mutating("strip.example.com", webhooks, "/strip", await selected(client, namespace))
        ],
    )
    await configure(configuration)
    created = await client.create(restricted_pod(namespace, "stripped", cpu="800m"))
    assert created.spec is not None and created.spec.containers
    resources = created.spec.containers[0].resources
    assert resources is not None
    # The webhook's change reinvoked the in-tree plugins: LimitRanger set the defaults again.
    assert (resources.requests, resources.limits) == ({"cpu": "100m"}, {"cpu": "300m"})
    assert "cpu request for container app" in (created.metadata.annotations or {}).get(
        "kubernetes.io/limit-ranger", ""
    )


async def test_resourcequota_charges_what_a_webhook_asked(
    client: Client, namespace: str, webhooks: Webhooks, configure: Configure
) -> None:
    quota = await client.create(
        ResourceQuota(
            metadata=ObjectMeta(name="q", namespace=namespace),
            spec=ResourceQuotaSpec(hard={"requests.cpu": "1"}),
        )
    )
    quota.status = ResourceQuotaStatus(hard={"requests.cpu": "1"}, used={"requests.cpu": "0"})
    await client.update_status(quota)
    webhooks.answers["/grow"] = pods_only(
        lambda asked: [
            {
                "op": "replace",
                "path": "/spec/containers/0/resources/requests/cpu",
                "value": asked["object"]["metadata"]["labels"]["cpu"],
            }
        ]
    )
    configuration = MutatingWebhookConfiguration(
        metadata=ObjectMeta(name=namespace),
        webhooks=[
            mutating("grow.example.com", webhooks, "/grow", await selected(client, namespace))
        ],
    )
    await configure(configuration)

    def asking(name: str, cpu: str) -> Pod:
        made = restricted_pod(namespace, name, cpu="100m")
        made.metadata.labels = {"cpu": cpu}
        assert made.spec is not None and made.spec.containers
        (container,) = made.spec.containers
        assert container.resources is not None
        container.resources.limits = None
        return made

    with pytest.raises(ApiError) as refused:
        await client.create(asking("big", "2"))
    assert refused.value.code == 403
    assert "exceeded quota: q, requested: requests.cpu=2, used: requests.cpu=0" in (
        refused.value.message
    )
    await client.create(asking("fits", "600m"))
    current = await client.get(ResourceQuota, "q", namespace)
    assert current.status is not None
    assert (current.status.used or {})["requests.cpu"] == "600m"


async def test_podsecurity_audit_mode_and_webhook_audit_annotations(
    client: Client, namespace: str, webhooks: Webhooks, audit_log: Path, configure: Configure
) -> None:
    await label(client, namespace, **{"pod-security.kubernetes.io/audit": "baseline"})
    webhooks.answers["/note"] = lambda asked: {"auditAnnotations": {"seen": asked["name"]}}
    configuration = ValidatingWebhookConfiguration(
        metadata=ObjectMeta(name=namespace),
        webhooks=[
            webhook(
                ValidatingWebhook,
                "note.example.com",
                webhooks,
                "/note",
                await selected(client, namespace),
                rules=rules("pods", "configmaps"),
            )
        ],
    )
    await configure(configuration)
    privileged = restricted_pod(namespace, "audited")
    assert privileged.spec is not None
    privileged.spec.host_network = True
    await client.create(privileged)  # audit mode never refuses
    annotations = await annotations_of(audit_log, namespace, "pods")
    assert annotations["pod-security.kubernetes.io/audit-violations"] == (
        'would violate PodSecurity "baseline:latest": host namespaces (hostNetwork=true)'
    )
    assert annotations["pod-security.kubernetes.io/enforce-policy"] == "privileged:latest"
    assert annotations["note.example.com/seen"] == "audited"
    assert annotations["authorization.k8s.io/decision"] == "allow"


@pytest.mark.parametrize(("policy", "calls", "saw"), [("IfNeeded", 2, "yes"), ("Never", 1, "no")])
async def test_reinvocation(
    client: Client,
    namespace: str,
    webhooks: Webhooks,
    audit_log: Path,
    configure: Configure,
    policy: str,
    calls: int,
    saw: str,
) -> None:
    """The first webhook notes whether the second one's label is there yet: only when it is
    reinvoked after the second one's change does it see it."""
    webhooks.answers["/first"] = lambda asked: patched(
        [
            {
                "op": "add",
                "path": "/metadata/annotations",
                "value": {
                    "first-saw-second": "yes"
                    if "second" in (asked["object"]["metadata"].get("labels") or {})
                    else "no"
                },
            }
        ]
    )
    webhooks.answers["/second"] = lambda asked: patched(
        [{"op": "add", "path": "/metadata/labels", "value": {"second": "here"}}]
    )
    selector = await selected(client, namespace)
    configuration = MutatingWebhookConfiguration(
        metadata=ObjectMeta(name=namespace),
        webhooks=[
            mutating("first.example.com", webhooks, "/first", selector, reinvocation_policy=policy),
            mutating("second.example.com", webhooks, "/second", selector),
        ],
    )
    await configure(configuration)
    created = await client.create(ConfigMap(metadata=ObjectMeta(name="c", namespace=namespace)))
    assert (created.metadata.annotations or {})["first-saw-second"] == saw
    assert (created.metadata.labels or {})["second"] == "here"
    assert (webhooks.called("/first"), webhooks.called("/second")) == (calls, 1)
    annotations = await annotations_of(audit_log, namespace, "configmaps")
    prefix = "mutation.webhook.admission.k8s.io/round_"
    called = sorted(
        (key.removeprefix(prefix).split("_")[0], json.loads(value)["webhook"])
        for key, value in annotations.items()
        if key.startswith(prefix)
    )
    assert called == sorted(
        [("0", "first.example.com"), ("0", "second.example.com")]
        + [("1", "first.example.com")] * (calls - 1)
    )
    assert all(json.loads(v)["mutated"] for k, v in annotations.items() if k.startswith(prefix))


@pytest.mark.parametrize(
    ("expression", "failure_policy", "outcome"),
    [
        ("object.metadata.name.startsWith('deny')", "Fail", "denied"),
        ("object.metadata.name.startsWith('other')", "Fail", "skipped"),
        ("request.operation == 'CREATE' && oldObject == null", "Fail", "denied"),
        ("authorizer.group('').resource('secrets').check('list').allowed()", "Fail", "denied"),
        ("!authorizer.requestResource.check('create').allowed()", "Fail", "skipped"),
        ("object.metadata.missing == 'x'", "Fail", "error"),
        ("object.metadata.missing == 'x'", "Ignore", "skipped"),
    ],
)
async def test_match_conditions(
    client: Client,
    namespace: str,
    webhooks: Webhooks,
    configure: Configure,
    expression: str,
    failure_policy: str,
    outcome: str,
) -> None:
    """The webhook denies all but the probe ``until_called`` sends, which the condition lets
    through whatever the tested expression makes of it (``true || error`` is true in CEL)."""
    webhooks.answers["/deny"] = lambda asked: denied("no") if asked["name"] != "probe" else {}
    condition = f"object.metadata.name == 'probe' || ({expression})"
    configuration = ValidatingWebhookConfiguration(
        metadata=ObjectMeta(name=namespace),
        webhooks=[
            webhook(
                ValidatingWebhook,
                "deny.example.com",
                webhooks,
                "/deny",
                await selected(client, namespace),
                failure_policy=failure_policy,
                match_conditions=[
                    MatchCondition(name="exists", expression="object != null"),
                    MatchCondition(name="tested", expression=condition),
                ],
            )
        ],
    )
    await configure(configuration)
    made = ConfigMap(metadata=ObjectMeta(name="deny-me", namespace=namespace))
    if outcome == "skipped":
        await client.create(made)
        assert not webhooks.reviews
        return
    with pytest.raises(ApiError) as refused:
        await client.create(made)
    assert refused.value.code == 403
    if outcome == "denied":
        assert (
            refused.value.message == 'admission webhook "deny.example.com" denied the request: no'
        )
        return
    assert refused.value.message == (
        f"configmaps \"deny-me\" is forbidden: expression '{condition}' resulted in error: "
        "no such key: missing"
    )
    assert not webhooks.reviews


async def test_bad_match_conditions_are_refused(client: Client, webhooks: Webhooks) -> None:
    with pytest.raises(ApiError) as refused:
        await client.create(
            ValidatingWebhookConfiguration(
                metadata=ObjectMeta(name="bad-conditions"),
                webhooks=[
                    webhook(
                        ValidatingWebhook,
                        "bad.example.com",
                        webhooks,
                        "/deny",
                        match_conditions=[
                            MatchCondition(name="good", expression="object != null"),
                            MatchCondition(name="bad", expression="self.x == 1"),
                        ],
                    )
                ],
            )
        )
    assert refused.value.code == 422
    assert (
        'webhooks[0].matchConditions[1].expression: Invalid value: "self.x == 1": compilation '
        "failed: ERROR: <input>:1:1: undeclared reference to 'self' (in container '')"
    ) in refused.value.message


GADGETS = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
        "versions": [
            {
                "name": version,
                "served": True,
                "storage": version == "v1",
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
            for version in ("v1", "v2")
        ],
    },
}


@pytest.mark.parametrize("match_policy", ["Equivalent", "Exact"])
async def test_match_policy(
    client: Client,
    namespace: str,
    webhooks: Webhooks,
    configure: Configure,
    match_policy: str,
) -> None:
    """A webhook registered for v1 gadgets is sent a v2 request converted to v1 (Equivalent),
    or not at all (Exact); its patch, made at v1, lands on the v2 object."""
    with contextlib.suppress(ApiError):  # made by the other parameter already
        await client.request(
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            body=json.dumps(GADGETS).encode(),
        )
    webhooks.answers["/gadgets"] = lambda asked: patched(
        [{"op": "add", "path": "/metadata/labels", "value": {"seen-as": asked["kind"]["version"]}}]
    )
    configuration = MutatingWebhookConfiguration(
        metadata=ObjectMeta(name=namespace),
        webhooks=[
            mutating(
                "gadgets.example.com",
                webhooks,
                "/gadgets",
                await selected(client, namespace),
                match_policy=match_policy,
                rules=[
                    RuleWithOperations(
                        operations=["CREATE"],
                        api_groups=["example.com"],
                        api_versions=["v1"],
                        resources=["gadgets"],
                    ),
                    *rules(),
                ],
            )
        ],
    )
    await configure(configuration)
    body = {"apiVersion": "example.com/v2", "kind": "Gadget", "metadata": {"name": "g"}}
    path = f"/apis/example.com/v2/namespaces/{namespace}/gadgets"
    for _ in range(100):  # until the CRD is served
        try:
            created = json.loads(await client.request("POST", path, body=json.dumps(body).encode()))
            break
        except ApiError as error:
            if error.code != 404:
                raise
            await asyncio.sleep(0.1)
    if match_policy == "Exact":
        assert not webhooks.reviews
        assert "labels" not in created["metadata"]
        return
    (review,) = webhooks.reviews
    asked = review["request"]
    assert asked["kind"] == {"group": "example.com", "version": "v1", "kind": "Gadget"}
    assert asked["resource"] == {"group": "example.com", "version": "v1", "resource": "gadgets"}
    assert asked["requestKind"]["version"] == "v2"
    assert asked["requestResource"]["version"] == "v2"
    assert asked["object"]["apiVersion"] == "example.com/v1"
    assert created["apiVersion"] == "example.com/v2"
    assert created["metadata"]["labels"] == {"seen-as": "v1"}
