"""The MutatingAdmissionPolicy plugin in process, over watch caches holding fixed policies and
bindings: apply configurations merged by list keys, JSON patches with ``jsonpatch.escapeKey``,
variables, match conditions, failurePolicy and upstream's refusal, reinvocation (by a later
policy, and in the admission chain by a mutating webhook), and the exempt policy kinds."""

from __future__ import annotations

from typing import Any, cast

import pytest

from controlplane.apiserver.auth import always_allow
from controlplane.apiserver.auth.admission import Plugin, chain, webhook
from controlplane.apiserver.auth.admission.mutatingpolicy import mutating_policies
from controlplane.apiserver.errors import ApiError
from controlplane.apiserver.registry.store import RequestContext, ResourceStore
from controlplane.apiserver.storage.watchcache import WatchCache
from kube.api import codec, walk
from kube.api.kinds.admissionregistration_v1 import (
    MutatingAdmissionPolicy,
    MutatingAdmissionPolicyBinding,
)
from kube.api.kinds.core_v1.pod import Pod
from kube.api.meta_v1 import Resource
from kube.api.scheme import KindInfo

PODS = {
    "resourceRules": [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
    ]
}
SIDECAR = """Object{spec: Object.spec{initContainers: [Object.spec.initContainers{
    name: "mesh-proxy", image: "mesh/proxy:v1.0.0", restartPolicy: "Always",
    ports: [Object.spec.initContainers.ports{containerPort: 15001}]}]}}"""


class StaticCache(WatchCache):
    """A watch cache that holds the given objects and has no store behind it."""

    def __init__(self, *objects: Resource) -> None:
        super().__init__(cast(ResourceStore, None))
        self.fixed = list(objects)

    def objects(self) -> list[Resource]:
        return list(self.fixed)

    async def lookup(self, namespace: str, name: str) -> Resource | None:
        return None


def policy(name: str, *mutations: dict[str, Any], **spec: Any) -> MutatingAdmissionPolicy:
    raw = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "matchConstraints": PODS,
            "mutations": list(mutations),
            "reinvocationPolicy": "Never",
            **spec,
        },
    }
    decoded = codec.from_builtins(raw, MutatingAdmissionPolicy).obj
    walk.set_defaults(decoded)
    return decoded


def binding(policy_name: str) -> MutatingAdmissionPolicyBinding:
    raw = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": f"{policy_name}-binding"},
        "spec": {"policyName": policy_name},
    }
    return codec.from_builtins(raw, MutatingAdmissionPolicyBinding).obj


def apply_configuration(expression: str) -> dict[str, Any]:
    return {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}}


def json_patch(expression: str) -> dict[str, Any]:
    return {"patchType": "JSONPatch", "jsonPatch": {"expression": expression}}


def pod(**spec: Any) -> Pod:
    raw = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "nginx"}], **spec},
    }
    return codec.from_builtins(raw, Pod).obj


def plugin(*policies: MutatingAdmissionPolicy) -> webhook.Mutation:
    return mutating_policies(
        StaticCache(*policies),
        StaticCache(*(binding(p.metadata.name or "") for p in policies)),
        StaticCache(),
        {},
        always_allow,
    )


async def admit(
    obj: Resource, *policies: MutatingAdmissionPolicy, operation: str = "CREATE"
) -> webhook.Reinvocation:
    """Run the plugin's mutating step as the chain does: once, and again if it asked."""
    step = plugin(*policies)
    rounds = webhook.Reinvocation()
    for again in (False, True):
        rounds.again = again
        await step(operation, obj.kind_info, obj, None, RequestContext(), rounds)
        if not rounds.wanted:
            break
    return rounds


def names(obj: Pod, field: str = "init_containers") -> list[str]:
    assert obj.spec is not None
    return [c.name or "" for c in getattr(obj.spec, field) or ()]


async def test_an_apply_configuration_merges_into_a_map_list_by_key() -> None:
    created = pod(initContainers=[{"name": "setup", "image": "busybox"}])
    rounds = await admit(created, policy("sidecar", apply_configuration(SIDECAR)))
    assert names(created) == ["setup", "mesh-proxy"]
    assert created.spec is not None and created.spec.init_containers is not None
    proxy = created.spec.init_containers[1]
    assert (proxy.image, proxy.restart_policy) == ("mesh/proxy:v1.0.0", "Always")
    assert proxy.ports is not None
    assert [(p.container_port, p.protocol) for p in proxy.ports] == [(15001, "TCP")]
    assert rounds.wanted
    # Applied to a pod that has the sidecar already, the same configuration changes nothing.
    again = await admit(created, policy("sidecar", apply_configuration(SIDECAR)))
    assert names(created) == ["setup", "mesh-proxy"] and not again.wanted


async def test_json_patches_with_escaped_keys_variables_and_params_null() -> None:
    created = pod()
    await admit(
        created,
        policy(
            "labels",
            json_patch(
                "[JSONPatch{op: 'add', path: '/metadata/labels/' + "
                "jsonpatch.escapeKey('example.com/tier'), value: variables.tier}]"
            ),
            json_patch(
                "[JSONPatch{op: 'replace', path: '/spec/containers/0/image', "
                "value: object.spec.containers[0].image + ':1.27'}]"
            ),
            # A paramKind and a binding without paramRef: params is null (as upstream).
            paramKind={"apiVersion": "v1", "kind": "ConfigMap"},
            variables=[{"name": "tier", "expression": "params == null ? 'web' : 'other'"}],
        ),
    )
    assert created.metadata.labels == {"app": "web", "example.com/tier": "web"}
    assert created.spec is not None and created.spec.containers is not None
    assert created.spec.containers[0].image == "nginx:1.27"


async def test_a_failed_test_operation_leaves_the_object_as_it_is() -> None:
    """The docs' conditional patch: replace the image only where it is still the one tested."""
    conditional = json_patch(
        "[JSONPatch{op: 'test', path: '/spec/containers/0/image', value: 'nginx'}, "
        "JSONPatch{op: 'replace', path: '/spec/containers/0/image', value: 'nginx:1.27'}]"
    )
    created = pod()
    await admit(created, policy("pin", conditional))
    assert created.spec is not None and created.spec.containers is not None
    assert created.spec.containers[0].image == "nginx:1.27"
    again = await admit(created, policy("pin", conditional))
    assert created.spec.containers[0].image == "nginx:1.27" and not again.wanted


async def test_a_false_match_condition_skips_the_policy() -> None:
    created = pod()
    await admit(
        created,
        policy(
            "skipped",
            apply_configuration("Object{metadata: Object.metadata{labels: {'x': 'y'}}}"),
            matchConditions=[
                {"name": "only-db", "expression": "object.metadata.labels.app == 'db'"}
            ],
        ),
    )
    assert created.metadata.labels == {"app": "web"}


@pytest.mark.parametrize(
    ("mutation", "message"),
    [
        (json_patch("object.spec.nothing"), "resulted in error"),
        (
            json_patch("[JSONPatch{op: 'remove', path: '/spec/absent'}]"),
            "JSON Patch: json patch operation 0 (remove '/spec/absent'): 'absent' does not exist",
        ),
        (
            json_patch("[{'op': 'remove', 'path': '/spec/nodeName'}]"),
            "type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch",
        ),
        (
            json_patch(
                "[JSONPatch{op: 'add', path: '/spec/securityContext', value: "
                "Object.spec.securityContext{seLinuxOptions: Object.spec.wrong{level: 's0'}}}]"
            ),
            'type mismatch: unexpected type name "Object.spec.wrong", expected '
            '"Object.spec.securityContext.seLinuxOptions"',
        ),
        (apply_configuration("'not an object'"), "must evaluate to Object but got string"),
        (
            apply_configuration("Object.spec{nodeName: 'n'}"),
            "must evaluate to Object but got Object.spec",
        ),
        (
            apply_configuration("Object{spec: Object.specx{nodeName: 'n'}}"),
            'type mismatch: unexpected type name "Object.specx", expected "Object.spec", which '
            "matches field name path from root Object type",
        ),
        (
            apply_configuration(
                "Object{spec: Object.spec{nodeSelector: {'disk': 'ssd'}, containers: "
                "[Object.spec.containers{name: 'app', args: ['-v']}]}}"
            ),
            "error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, "
            "maps or structs: .spec.nodeSelector, .spec.containers[0].args",
        ),
        (
            apply_configuration("Object{spec: Object.spec{nodeName: 7}}"),
            "the mutated object is not valid",
        ),
    ],
    ids=[
        "evaluation",
        "patch",
        "not-patches",
        "patch-value-type-name",
        "not-an-object",
        "not-the-root",
        "type-name",
        "atomic",
        "wrong-type",
    ],
)
async def test_errors_refuse_under_fail_and_are_skipped_under_ignore(
    mutation: dict[str, Any], message: str
) -> None:
    with pytest.raises(ApiError) as refused:
        await admit(pod(), policy("broken", mutation))
    assert (refused.value.code, refused.value.reason) == (403, "Invalid")
    assert refused.value.message.startswith(
        "policy 'broken' with binding 'broken-binding' denied request: "
    )
    assert message in refused.value.message
    created = pod()
    await admit(created, policy("broken", mutation, failurePolicy="Ignore"))
    assert created == pod()


COPY_TIER = apply_configuration(
    "Object{metadata: Object.metadata{annotations: {'tier': "
    "'tier' in object.metadata.labels ? object.metadata.labels.tier : 'none'}}}"
)
"""Copies the tier label into an annotation (``none`` while there is no such label)."""


async def test_if_needed_policies_run_again_after_a_later_change() -> None:
    """``a`` copies the tier label into an annotation; ``b`` (after it, by name) sets the
    label.  Only with ``IfNeeded`` does ``a`` see ``b``'s change."""
    copy = COPY_TIER
    label = apply_configuration("Object{metadata: Object.metadata{labels: {'tier': 'front'}}}")
    for reinvocation, annotation in (("Never", "none"), ("IfNeeded", "front")):
        created = pod()
        await admit(
            created,
            policy("a", copy, reinvocationPolicy=reinvocation),
            policy("b", label),
        )
        assert created.metadata.annotations == {"tier": annotation}, reinvocation


async def test_deletes_and_the_policy_kinds_are_never_mutated() -> None:
    touch = apply_configuration("Object{metadata: Object.metadata{labels: {'touched': 'yes'}}}")
    everything = {
        "resourceRules": [
            {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}
        ]
    }
    itself = policy("all", touch, matchConstraints=everything)
    await admit(itself, itself)
    assert itself.metadata.labels is None
    deleted = pod()
    await admit(deleted, itself, operation="DELETE")
    assert deleted.metadata.labels == {"app": "web"}
    created = pod()
    await admit(created, itself)
    assert created.metadata.labels == {"app": "web", "touched": "yes"}


async def test_a_policy_is_matched_against_what_the_policies_before_it_did() -> None:
    label = apply_configuration("Object{metadata: Object.metadata{labels: {'tier': 'front'}}}")
    mark = apply_configuration("Object{metadata: Object.metadata{annotations: {'seen': 'yes'}}}")
    selected = {**PODS, "objectSelector": {"matchLabels": {"tier": "front"}}}
    created = pod()
    await admit(created, policy("a", label), policy("b", mark, matchConstraints=selected))
    assert created.metadata.annotations == {"seen": "yes"}


async def test_a_failing_mutation_skips_itself_and_every_error_is_a_cause() -> None:
    label = apply_configuration("Object{metadata: Object.metadata{labels: {'tier': 'front'}}}")
    broken = json_patch("object.spec.nothing")
    created = pod()
    await admit(created, policy("a", broken, label, failurePolicy="Ignore"))
    assert created.metadata.labels == {"app": "web", "tier": "front"}
    with pytest.raises(ApiError) as refused:
        await admit(pod(), policy("a", broken), policy("b", broken))
    assert refused.value.details is not None
    causes = [c.message or "" for c in refused.value.details.causes or ()]
    assert [c.split(" denied request")[0] for c in causes] == [
        "policy 'a' with binding 'a-binding'",
        "policy 'b' with binding 'b-binding'",
    ]


async def test_a_mutating_webhooks_change_reinvokes_if_needed_policies() -> None:
    """In the admission chain, a mutating webhook (here a step that labels the pod the first
    time, as a webhook's patch would) runs after the policies; its change runs again the
    policies that asked for it."""

    async def labelling_webhook(
        operation: str,
        info: KindInfo,
        obj: Resource,
        old: Resource | None,
        ctx: RequestContext,
        rounds: webhook.Reinvocation,
    ) -> None:
        if not rounds.again:
            obj.metadata.labels = {**(obj.metadata.labels or {}), "tier": "back"}
            rounds.changed()
            rounds.wanted = True

    for reinvocation, annotation in (("Never", "none"), ("IfNeeded", "back")):
        admit = chain(
            {
                "MutatingAdmissionPolicy": Plugin(
                    plugin(policy("copy", COPY_TIER, reinvocationPolicy=reinvocation))
                ),
                "MutatingAdmissionWebhook": Plugin(labelling_webhook),
            }
        )
        created = pod()
        await admit("CREATE", Pod.kind_info, created, None, RequestContext())
        assert created.metadata.annotations == {"tier": annotation}, reinvocation
