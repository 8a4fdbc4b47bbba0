"""RBAC, the Node authorizer and the bootstrap policy's reconciliation, decided from in-memory
listings: every rule field allows and denies exactly what it says."""

from __future__ import annotations

import pytest

from controlplane.apiserver.auth import AUTHENTICATED, MASTERS, User
from controlplane.apiserver.auth.authz import AlwaysDeny, Union
from controlplane.apiserver.auth.bootstrappolicy import (
    AUTOUPDATE,
    NODE_RULES,
    cluster_role_bindings,
    cluster_roles,
    controller_roles,
    rule,
)
from controlplane.apiserver.auth.nodeauthz import NodeAuthorizer
from controlplane.apiserver.auth.rbac import RBACAuthorizer, rule_allows
from controlplane.apiserver.auth.reconcile import reconcile_binding, reconcile_role
from controlplane.apiserver.endpoints.requestinfo import RequestInfo, parse
from kube.api.kinds.core_v1.pod import Container, EnvFromSource, Pod, PodSpec, SecretEnvSource
from kube.api.kinds.core_v1.volume import (
    ConfigMapVolumeSource,
    PersistentVolumeClaim,
    PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource,
    SecretVolumeSource,
    Volume,
)
from kube.api.kinds.rbac_v1 import (
    ClusterRole,
    ClusterRoleBinding,
    PolicyRule,
    Role,
    RoleBinding,
    RoleRef,
    Subject,
)
from kube.api.meta_v1 import ObjectMeta, Resource


class Objects:
    """A listing over a fixed set of objects, standing in for a watch cache."""

    def __init__(self, *objects: Resource) -> None:
        self.items = {(o.metadata.namespace or "", o.metadata.name or ""): o for o in objects}

    def get(self, namespace: str, name: str) -> Resource | None:
        return self.items.get((namespace, name))

    def objects(self) -> list[Resource]:
        return list(self.items.values())


def _info(method: str, path: str, query: str = "") -> RequestInfo:
    params = dict(p.split("=", 1) for p in query.split("&") if p)
    return parse(method, path, params)


PODS = "/api/v1/namespaces/team/pods"

RULE_CASES = [
    # (rule, method, path, allowed)
    (rule(("get",), ("",), ("pods",)), "GET", f"{PODS}/web", True),
    (rule(("get",), ("",), ("pods",)), "GET", PODS, False),  # list is not get
    (rule(("list",), ("",), ("pods",)), "GET", PODS, True),
    (rule(("get",), ("apps",), ("pods",)), "GET", f"{PODS}/web", False),  # wrong group
    (rule(("get",), ("*",), ("pods",)), "GET", f"{PODS}/web", True),
    (rule(("*",), ("",), ("pods",)), "DELETE", f"{PODS}/web", True),
    (rule(("get",), ("",), ("pods",)), "GET", f"{PODS}/web/log", False),  # subresource
    (rule(("get",), ("",), ("pods/log",)), "GET", f"{PODS}/web/log", True),
    (rule(("get",), ("",), ("pods/log",)), "GET", f"{PODS}/web", False),
    (rule(("get",), ("",), ("*",)), "GET", f"{PODS}/web/log", True),
    (
        rule(("patch",), ("apps",), ("*/scale",)),
        "PATCH",
        "/apis/apps/v1/namespaces/t/deployments/d/scale",
        True,
    ),
    (rule(("get",), ("",), ("pods",), ("web",)), "GET", f"{PODS}/web", True),
    (rule(("get",), ("",), ("pods",), ("web",)), "GET", f"{PODS}/other", False),
    (rule(("list",), ("",), ("pods",), ("web",)), "GET", PODS, False),  # names never cover list
    (rule(("list",), ("",), ("pods",)), "GET", PODS + "?watch=true", False),
    (PolicyRule(verbs=["get"], non_resource_urls=["/healthz"]), "GET", "/healthz", True),
    (PolicyRule(verbs=["get"], non_resource_urls=["/healthz"]), "GET", "/healthz/etcd", False),
    (PolicyRule(verbs=["get"], non_resource_urls=["/healthz/*"]), "GET", "/healthz/etcd", True),
    (PolicyRule(verbs=["get"], non_resource_urls=["/healthz"]), "POST", "/healthz", False),
    (PolicyRule(verbs=["get"], non_resource_urls=["*"]), "GET", "/metrics", True),
    (PolicyRule(verbs=["get"], non_resource_urls=["*"]), "GET", f"{PODS}/web", False),
    (rule(("get",), ("",), ("*",)), "GET", "/metrics", False),
]


@pytest.mark.parametrize(
    ("policy_rule", "method", "path", "allowed"),
    RULE_CASES,
    ids=[
        f"{m} {p} {r.verbs}{r.resources or r.non_resource_urls}{r.resource_names or ''}"
        for r, m, p, _ in RULE_CASES
    ],
)
def test_rule_allows_exactly_what_it_says(
    policy_rule: PolicyRule, method: str, path: str, allowed: bool
) -> None:
    path, _, query = path.partition("?")
    assert rule_allows(policy_rule, _info(method, path, query)) is allowed


ALICE = User("alice", ("devs", AUTHENTICATED))
ROBOT = User("system:serviceaccount:team:robot", ("system:serviceaccounts", AUTHENTICATED))


def _authorizer() -> RBACAuthorizer:
    pod_reader = Role(
        metadata=ObjectMeta(name="pod-reader", namespace="team"),
        rules=[rule(("get", "list"), ("",), ("pods",))],
    )
    node_viewer = ClusterRole(
        metadata=ObjectMeta(name="node-viewer"), rules=[rule(("get",), ("",), ("nodes",))]
    )
    cm_editor = ClusterRole(
        metadata=ObjectMeta(name="cm-editor"), rules=[rule(("update",), ("",), ("configmaps",))]
    )
    bindings = [
        RoleBinding(
            metadata=ObjectMeta(name="robot-reads", namespace="team"),
            role_ref=RoleRef(kind="Role", name="pod-reader"),
            subjects=[Subject(kind="ServiceAccount", name="robot")],  # the binding's namespace
        ),
        RoleBinding(
            metadata=ObjectMeta(name="devs-edit-cms", namespace="team"),
            role_ref=RoleRef(kind="ClusterRole", name="cm-editor"),
            subjects=[Subject(kind="Group", name="devs")],
        ),
        RoleBinding(
            metadata=ObjectMeta(name="dangling", namespace="team"),
            role_ref=RoleRef(kind="Role", name="missing"),
            subjects=[Subject(kind="User", name="alice")],
        ),
    ]
    cluster_bindings = [
        ClusterRoleBinding(
            metadata=ObjectMeta(name="alice-nodes"),
            role_ref=RoleRef(kind="ClusterRole", name="node-viewer"),
            subjects=[Subject(kind="User", name="alice")],
        )
    ]
    return RBACAuthorizer(
        Objects(pod_reader),
        Objects(node_viewer, cm_editor),
        Objects(*bindings),
        Objects(*cluster_bindings),
    )


BINDING_CASES = [
    (ROBOT, "GET", f"{PODS}/web", True),
    (ROBOT, "GET", PODS, True),
    (ROBOT, "DELETE", f"{PODS}/web", False),
    (ROBOT, "GET", "/api/v1/namespaces/other/pods/web", False),  # a RoleBinding is local
    (ROBOT, "GET", "/api/v1/nodes/n1", False),
    (ALICE, "GET", "/api/v1/nodes/n1", True),  # ClusterRoleBinding to a user
    (ALICE, "GET", f"{PODS}/web", False),
    (ALICE, "PUT", "/api/v1/namespaces/team/configmaps/c", True),  # via her group
    (ALICE, "PUT", "/api/v1/namespaces/other/configmaps/c", False),
    (User("bob", (AUTHENTICATED,)), "GET", "/api/v1/nodes/n1", False),
]


@pytest.mark.parametrize(
    ("user", "method", "path", "allowed"),
    BINDING_CASES,
    ids=[f"{u.name.rsplit(':', 1)[-1]} {m} {p}" for u, m, p, _ in BINDING_CASES],
)
def test_bindings_grant_their_roles_where_they_apply(
    user: User, method: str, path: str, allowed: bool
) -> None:
    assert _authorizer()(user, _info(method, path)) is allowed


def test_rules_for_lists_what_applies_in_the_namespace() -> None:
    rules, incomplete = _authorizer().rules_for(ALICE, "team")
    assert not incomplete
    assert [r.resources for r in rules] == [["nodes"], ["configmaps"]]
    assert _authorizer().rules_for(ROBOT, "other") == ([], False)


def test_masters_are_allowed_before_any_mode() -> None:
    union = Union([AlwaysDeny()])
    admin = User("admin", (MASTERS, AUTHENTICATED))
    assert union(admin, _info("DELETE", "/api/v1/nodes/n1"))
    assert not union(ALICE, _info("GET", "/api/v1/nodes/n1"))


# The Node authorizer.


def _node_pod(name: str, node: str, secret: str, config_map: str, claim: str) -> Pod:
    return Pod(
        metadata=ObjectMeta(name=name, namespace="team", uid=f"uid-{name}"),
        spec=PodSpec(
            node_name=node,
            service_account_name=f"sa-{name}",
            containers=[
                Container(
                    name="c",
                    image="busybox",
                    env_from=[EnvFromSource(secret_ref=SecretEnvSource(name=f"env-{secret}"))],
                )
            ],
            volumes=[
                Volume(name="s", secret=SecretVolumeSource(secret_name=secret)),
                Volume(name="c", config_map=ConfigMapVolumeSource(name=config_map)),
                Volume(
                    name="p",
                    persistent_volume_claim=PersistentVolumeClaimVolumeSource(claim_name=claim),
                ),
            ],
        ),
    )


def _node_authorizer() -> NodeAuthorizer:
    claims = Objects(
        PersistentVolumeClaim(
            metadata=ObjectMeta(name="data-a", namespace="team"),
            spec=PersistentVolumeClaimSpec(volume_name="pv-a"),
        ),
        PersistentVolumeClaim(
            metadata=ObjectMeta(name="data-b", namespace="team"),
            spec=PersistentVolumeClaimSpec(volume_name="pv-b"),
        ),
    )
    pods = Objects(
        _node_pod("a", "n1", "secret-a", "cm-a", "data-a"),
        _node_pod("b", "n2", "secret-b", "cm-b", "data-b"),
    )
    return NodeAuthorizer(pods, claims, NODE_RULES)


N1 = User("system:node:n1", ("system:nodes", AUTHENTICATED))
NS = "/api/v1/namespaces/team"
NODE_CASES = [
    ("GET", "/api/v1/nodes/n1", "", True),
    ("GET", "/api/v1/nodes/n2", "", False),
    ("PATCH", "/api/v1/nodes/n1/status", "", True),
    ("PATCH", "/api/v1/nodes/n2/status", "", False),
    ("PUT", "/api/v1/nodes/n2", "", False),
    ("DELETE", "/api/v1/nodes/n2", "", False),
    ("GET", "/api/v1/nodes", "fieldSelector=metadata.name%3Dn1", False),  # raw, not decoded
    ("GET", "/api/v1/nodes", "fieldSelector=metadata.name=n1", True),
    ("GET", "/api/v1/nodes", "", False),
    ("GET", f"{NS}/pods/a", "", True),
    ("GET", f"{NS}/pods/b", "", False),
    ("PATCH", f"{NS}/pods/a/status", "", True),
    ("PATCH", f"{NS}/pods/b/status", "", False),
    ("GET", "/api/v1/pods", "fieldSelector=spec.nodeName=n1", True),
    ("GET", "/api/v1/pods", "fieldSelector=spec.nodeName=n2", False),
    ("GET", "/api/v1/pods", "", False),
    ("GET", f"{NS}/secrets/secret-a", "", True),
    ("GET", f"{NS}/secrets/env-secret-a", "", True),
    ("GET", f"{NS}/secrets/secret-b", "", False),  # another node's pod's secret
    ("GET", f"{NS}/secrets/env-secret-b", "", False),
    ("GET", f"{NS}/secrets", "fieldSelector=metadata.name=secret-a", True),
    ("GET", f"{NS}/secrets", "", False),
    ("PUT", f"{NS}/secrets/secret-a", "", False),
    ("GET", f"{NS}/configmaps/cm-a", "", True),
    ("GET", f"{NS}/configmaps/cm-b", "", False),
    ("GET", f"{NS}/persistentvolumeclaims/data-a", "", True),
    ("GET", f"{NS}/persistentvolumeclaims/data-b", "", False),
    ("GET", "/api/v1/persistentvolumes/pv-a", "", True),
    ("GET", "/api/v1/persistentvolumes/pv-b", "", False),
    ("POST", f"{NS}/serviceaccounts/sa-a/token", "", True),
    ("POST", f"{NS}/serviceaccounts/sa-b/token", "", False),
    ("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", "", True),
    ("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n2", "", False),
    ("POST", f"{NS}/events", "", True),  # from the system:node rules
    ("GET", "/api/v1/services", "", True),
    ("DELETE", f"{NS}/services/web", "", False),
]


@pytest.mark.parametrize(
    ("method", "path", "query", "allowed"),
    NODE_CASES,
    ids=[f"{m} {p}?{q}" for m, p, q, _ in NODE_CASES],
)
def test_a_node_reaches_only_its_own_pods_and_what_they_use(
    method: str, path: str, query: str, allowed: bool
) -> None:
    assert _node_authorizer()(N1, _info(method, path, query)) is allowed


def test_the_node_authorizer_has_no_opinion_on_other_users() -> None:
    impostor = User("system:node:n1", (AUTHENTICATED,))  # the name without the group
    assert not _node_authorizer()(impostor, _info("GET", f"{NS}/secrets/secret-a"))


# Bootstrap policy reconciliation.


def test_the_bootstrap_policy_has_upstreams_essentials() -> None:
    roles = {r.metadata.name: r for r in cluster_roles()}
    assert {"cluster-admin", "admin", "edit", "view", "system:node", "system:kube-dns"} <= set(
        roles
    )
    assert roles["view"].aggregation_rule is not None and roles["view"].rules is None
    bindings = {b.metadata.name: b for b in cluster_role_bindings()}
    assert bindings["cluster-admin"].subjects == [
        Subject(kind="Group", api_group="rbac.authorization.k8s.io", name="system:masters")
    ]


def test_reconciling_adds_missing_rules_and_keeps_the_users() -> None:
    wanted = next(r for r in cluster_roles() if r.metadata.name == "system:kube-dns")
    assert reconcile_role(wanted, wanted) is None, "nothing to do when identical"
    mine = rule(("get",), ("",), ("configmaps",))
    existing = ClusterRole(
        metadata=ObjectMeta(name="system:kube-dns", labels={"mine": "yes"}),
        rules=[mine, rule(("*",), ("",), ("endpoints",))],  # covers part of what is wanted
    )
    updated = reconcile_role(existing, wanted)
    assert updated is not None
    assert updated.rules is not None and updated.rules[:2] == existing.rules
    assert reconcile_role(updated, wanted) is None, "a second pass changes nothing"
    assert (updated.metadata.labels or {})["mine"] == "yes"
    assert (updated.metadata.annotations or {})[AUTOUPDATE] == "true"
    opted_out = ClusterRole(
        metadata=ObjectMeta(name="system:kube-dns", annotations={AUTOUPDATE: "false"}), rules=[]
    )
    assert reconcile_role(opted_out, wanted) is None


def test_reconciling_a_binding_adds_subjects_and_fixes_the_role() -> None:
    wanted = next(b for b in cluster_role_bindings() if b.metadata.name == "cluster-admin")
    extra = Subject(kind="User", api_group="rbac.authorization.k8s.io", name="me")
    existing = ClusterRoleBinding(
        metadata=ObjectMeta(name="cluster-admin"),
        role_ref=RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="view"),
        subjects=[extra],
    )
    updated = reconcile_binding(existing, wanted)
    assert updated is not None
    assert updated.subjects == [extra, *(wanted.subjects or ())]
    assert updated.role_ref == wanted.role_ref
    assert reconcile_binding(updated, wanted) is None


def test_each_controller_gets_only_its_own_role() -> None:
    roles = {r.metadata.name: r for r in (*cluster_roles(), *controller_roles())}
    bindings = {b.metadata.name: b for b in cluster_role_bindings()}
    authorizer = RBACAuthorizer(
        Objects(), Objects(*roles.values()), Objects(), Objects(*bindings.values())
    )
    deployments = User(
        "system:serviceaccount:kube-system:deployment-controller",
        ("system:serviceaccounts", "system:serviceaccounts:kube-system", AUTHENTICATED),
    )
    assert authorizer(deployments, _info("POST", "/apis/apps/v1/namespaces/team/replicasets"))
    assert authorizer(
        deployments, _info("PUT", "/apis/apps/v1/namespaces/team/deployments/d/status")
    )
    assert not authorizer(deployments, _info("GET", "/api/v1/namespaces/team/secrets/s"))
    assert not authorizer(deployments, _info("POST", "/apis/batch/v1/namespaces/team/jobs"))
    controllers = [name for name in roles if name and name.startswith("system:controller:")]
    assert controllers and all(name in bindings for name in controllers)
