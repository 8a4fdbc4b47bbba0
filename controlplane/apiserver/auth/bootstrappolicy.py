"""The bootstrap RBAC policy: the objects, as data; ``reconcile`` brings them into the store.

The roles and bindings upstream's ``bootstrappolicy`` defines, for users, for the cluster's
own components and for certificate approval: ``cluster-admin`` (bound to ``system:masters``),
the aggregated ``admin``/``edit``/``view`` with the ``system:aggregate-to-*`` roles that feed
them, ``system:basic-user``, ``system:discovery``, ``system:public-info-viewer``,
``system:node``, ``system:node-proxier``, ``system:kube-scheduler``,
``system:kube-controller-manager``, ``system:kube-dns``, ``system:cloud-controller-manager``
(the cloud package's own role, bound to ``system:cloud-controller-manager``),
the CSR roles and approvers (with kubeadm's bindings of them for TLS bootstrapping, to the
group of kubelab's bootstrap tokens and to ``system:nodes``), the ``system:controller:<name>``
role of each controller kubelab runs (bound to the ``kube-system`` service account of that
name, which a controller manager using per-controller credentials acts as), and the bindings
upstream ships.  Beside them, upstream's namespaced Roles and RoleBindings: in kube-system the
leader-locking roles of the scheduler and the controller-manager, the
extension-apiserver-authentication reader and the roles of the bootstrap-signer, token-cleaner
and cloud-provider controllers; in kube-public the bootstrap-signer's, and kubeadm's role that
lets ``system:anonymous`` read ``cluster-info`` (named ``kubelab:`` like the other kubeadm
bindings here).

"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from controlplane.bootstraptoken import BOOTSTRAP_TOKEN_GROUP
from controlplane.cloud import rbac as cloud_rbac
from kube.api.bootstraptoken import NAMESPACE as KUBE_SYSTEM
from kube.api.kinds.rbac_v1 import (
    GROUP,
    AggregationRule,
    ClusterRole,
    ClusterRoleBinding,
    PolicyRule,
    Role,
    RoleBinding,
    RoleRef,
    Subject,
)
from kube.api.meta_v1 import LabelSelector, ObjectMeta
from kube.client import clusterinfo

log = logging.getLogger(__name__)


AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"
BOOTSTRAPPING = {"kubernetes.io/bootstrapping": "rbac-defaults"}
AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-"

READ = ("get", "list", "watch")
CERTIFICATES = "certificates.k8s.io"
WRITE = ("create", "update", "patch", "delete", "deletecollection")


def rule(
    verbs: Sequence[str],
    groups: Sequence[str],
    resources: Sequence[str],
    names: Sequence[str] = (),
) -> PolicyRule:
    return PolicyRule(
        verbs=list(verbs),
        api_groups=list(groups),
        resources=list(resources),
        resource_names=list(names) or None,
    )


def url_rule(verbs: Sequence[str], urls: Sequence[str]) -> PolicyRule:
    return PolicyRule(verbs=list(verbs), non_resource_urls=list(urls))


EVENTS = (
    rule(("create", "update", "patch"), ("",), ("events",)),
    rule(("create", "update", "patch"), ("events.k8s.io",), ("events",)),
)
REVIEWS = (
    rule(("create",), ("authentication.k8s.io",), ("tokenreviews",)),
    rule(("create",), ("authorization.k8s.io",), ("subjectaccessreviews",)),
)

NODE_RULES = [
    rule(("create",), ("authentication.k8s.io",), ("tokenreviews",)),
    rule(
        ("create",),
        ("authorization.k8s.io",),
        ("subjectaccessreviews", "localsubjectaccessreviews"),
    ),
    rule(READ, ("",), ("services",)),
    rule(("create", "get", "list", "watch"), ("",), ("nodes",)),
    rule(("update", "patch"), ("",), ("nodes/status",)),
    rule(("update", "patch"), ("",), ("nodes",)),
    *EVENTS,
    rule(READ, ("",), ("pods",)),
    rule(("create", "delete"), ("",), ("pods",)),
    rule(("update", "patch"), ("",), ("pods/status",)),
    rule(("create",), ("",), ("pods/eviction",)),
    rule(READ, ("",), ("secrets", "configmaps")),
    rule(("get",), ("",), ("persistentvolumeclaims", "persistentvolumes")),
    rule(("get",), ("",), ("endpoints",)),
    rule(
        ("create", "get", "list", "watch"),
        ("certificates.k8s.io",),
        ("certificatesigningrequests",),
    ),
    rule(("get", "create", "update", "patch", "delete"), ("coordination.k8s.io",), ("leases",)),
    rule(("get",), ("storage.k8s.io",), ("volumeattachments",)),
    rule(("create",), ("",), ("serviceaccounts/token",)),
    rule(("update", "patch"), ("",), ("persistentvolumeclaims/status",)),
    rule(READ, ("storage.k8s.io",), ("csidrivers",)),
    rule(("get", "create", "update", "patch", "delete"), ("storage.k8s.io",), ("csinodes",)),
    rule(READ, ("node.k8s.io",), ("runtimeclasses",)),
]
"""What ``system:node`` grants; the Node authorizer narrows it to the kubelet's own objects."""


def _cluster_role(
    name: str,
    rules: Sequence[PolicyRule] = (),
    labels: dict[str, str] | None = None,
    aggregate: str | None = None,
) -> ClusterRole:
    return ClusterRole(
        metadata=ObjectMeta(
            name=name,
            labels={**BOOTSTRAPPING, **(labels or {})},
            annotations={AUTOUPDATE: "true"},
        ),
        rules=list(rules) if aggregate is None else None,
        aggregation_rule=AggregationRule(
            cluster_role_selectors=[
                LabelSelector(match_labels={f"{AGGREGATE_TO}{aggregate}": "true"})
            ]
        )
        if aggregate is not None
        else None,
    )


def _seeded(role: ClusterRole) -> ClusterRole:
    """A role another package defines (its component's own data), marked as bootstrap policy."""
    role.metadata.labels = {**(role.metadata.labels or {}), **BOOTSTRAPPING}
    role.metadata.annotations = {**(role.metadata.annotations or {}), AUTOUPDATE: "true"}
    return role


def _user(name: str) -> Subject:
    return Subject(kind="User", api_group=GROUP, name=name)


def _group(name: str) -> Subject:
    return Subject(kind="Group", api_group=GROUP, name=name)


def _service_account(name: str) -> Subject:
    return Subject(kind="ServiceAccount", name=name, namespace=KUBE_SYSTEM)


def _meta(name: str, namespace: str | None = None) -> ObjectMeta:
    return ObjectMeta(
        name=name,
        namespace=namespace,
        labels=dict(BOOTSTRAPPING),
        annotations={AUTOUPDATE: "true"},
    )


def _binding(name: str, role: str, subjects: Sequence[Subject]) -> ClusterRoleBinding:
    return ClusterRoleBinding(
        metadata=_meta(name),
        role_ref=RoleRef(api_group=GROUP, kind="ClusterRole", name=role),
        subjects=list(subjects) or None,
    )


def _aggregate(to: str) -> dict[str, str]:
    return {f"{AGGREGATE_TO}{to}": "true"}


def cluster_roles() -> list[ClusterRole]:
    """Upstream's bootstrap ClusterRoles (without the per-controller ``system:controller:*``)."""
    view = [
        rule(
            READ,
            ("",),
            (
                "pods",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/status",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "configmaps",
            ),
        ),
        rule(
            READ,
            ("",),
            (
                "limitranges",
                "resourcequotas",
                "bindings",
                "events",
                "pods/status",
                "resourcequotas/status",
                "namespaces/status",
                "replicationcontrollers/status",
                "pods/log",
            ),
        ),
        rule(READ, ("",), ("namespaces",)),
        rule(READ, ("discovery.k8s.io",), ("endpointslices",)),
        rule(
            READ,
            ("apps",),
            (
                "controllerrevisions",
                "statefulsets",
                "statefulsets/scale",
                "statefulsets/status",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
            ),
        ),
        rule(
            READ, ("autoscaling",), ("horizontalpodautoscalers", "horizontalpodautoscalers/status")
        ),
        rule(READ, ("batch",), ("jobs", "cronjobs", "cronjobs/status", "jobs/status")),
        rule(READ, ("policy",), ("poddisruptionbudgets", "poddisruptionbudgets/status")),
        rule(READ, ("networking.k8s.io",), ("networkpolicies", "ingresses", "ingresses/status")),
    ]
    edit = [
        rule(
            READ,
            ("",),
            (
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
                "secrets",
                "services/proxy",
            ),
        ),
        rule(("impersonate",), ("",), ("serviceaccounts",)),
        rule(WRITE, ("",), ("pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward")),
        rule(("create",), ("",), ("pods/eviction",)),
        rule(
            WRITE,
            ("",),
            (
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/proxy",
                "persistentvolumeclaims",
                "configmaps",
                "secrets",
                "events",
            ),
        ),
        rule(("create",), ("",), ("serviceaccounts/token",)),
        rule(
            WRITE,
            ("apps",),
            (
                "statefulsets",
                "statefulsets/scale",
                "daemonsets",
                "deployments",
                "deployments/scale",
                "deployments/rollback",
                "replicasets",
                "replicasets/scale",
            ),
        ),
        rule(WRITE, ("autoscaling",), ("horizontalpodautoscalers",)),
        rule(WRITE, ("batch",), ("jobs", "cronjobs")),
        rule(WRITE, ("policy",), ("poddisruptionbudgets",)),
        rule(WRITE, ("networking.k8s.io",), ("networkpolicies", "ingresses")),
        rule((*READ, *WRITE), ("coordination.k8s.io",), ("leases",)),
    ]
    admin = [
        rule(("create",), ("authorization.k8s.io",), ("localsubjectaccessreviews",)),
        rule((*READ, *WRITE), (GROUP,), ("roles", "rolebindings")),
    ]
    health = ("/healthz", "/livez", "/readyz", "/version", "/version/")
    return [
        _cluster_role("cluster-admin", [rule(("*",), ("*",), ("*",)), url_rule(("*",), ("*",))]),
        _cluster_role(
            "system:discovery",
            [
                url_rule(
                    ("get",),
                    ("/api", "/api/*", "/apis", "/apis/*", *health, "/openapi", "/openapi/*"),
                )
            ],
        ),
        _cluster_role("system:public-info-viewer", [url_rule(("get",), health)]),
        _cluster_role(
            "system:basic-user",
            [
                rule(
                    ("create",),
                    ("authorization.k8s.io",),
                    ("selfsubjectaccessreviews", "selfsubjectrulesreviews"),
                ),
                rule(("create",), ("authentication.k8s.io",), ("selfsubjectreviews",)),
            ],
        ),
        _cluster_role(
            "system:monitoring",
            [
                url_rule(
                    ("get",),
                    (
                        "/metrics",
                        "/metrics/slis",
                        "/livez",
                        "/readyz",
                        "/healthz",
                        "/livez/*",
                        "/readyz/*",
                        "/healthz/*",
                    ),
                )
            ],
        ),
        _cluster_role("admin", aggregate="admin"),
        _cluster_role("edit", labels=_aggregate("admin"), aggregate="edit"),
        _cluster_role("view", labels=_aggregate("edit"), aggregate="view"),
        _cluster_role("system:aggregate-to-admin", admin, labels=_aggregate("admin")),
        _cluster_role("system:aggregate-to-edit", edit, labels=_aggregate("edit")),
        _cluster_role("system:aggregate-to-view", view, labels=_aggregate("view")),
        _cluster_role("system:auth-delegator", REVIEWS),
        _cluster_role("system:node", NODE_RULES),
        _cluster_role(
            "system:node-proxier",
            [
                rule(("list", "watch"), ("",), ("services", "endpoints")),
                rule(READ, ("",), ("nodes",)),
                *EVENTS,
                rule(("list", "watch"), ("discovery.k8s.io",), ("endpointslices",)),
            ],
        ),
        _cluster_role(
            "system:node-bootstrapper",
            [
                rule(
                    ("create", "get", "list", "watch"),
                    ("certificates.k8s.io",),
                    ("certificatesigningrequests",),
                )
            ],
        ),
        _cluster_role(
            "system:kubelet-api-admin",
            [
                rule(("get", "list", "watch", "proxy"), ("",), ("nodes",)),
                rule(
                    ("*",),
                    ("",),
                    (
                        "nodes/proxy",
                        "nodes/metrics",
                        "nodes/stats",
                        "nodes/log",
                        "nodes/spec",
                        "nodes/configz",
                        "nodes/healthz",
                        "nodes/pods",
                        "nodes/checkpoint",
                    ),
                ),
            ],
        ),
        _cluster_role(
            "system:kube-scheduler",
            [
                *EVENTS,
                rule(("create",), ("coordination.k8s.io",), ("leases",)),
                rule(("get", "update"), ("coordination.k8s.io",), ("leases",), ("kube-scheduler",)),
                rule(READ, ("",), ("nodes",)),
                rule(("get", "list", "watch", "delete"), ("",), ("pods",)),
                rule(("create",), ("",), ("pods/binding", "bindings")),
                rule(("patch", "update"), ("",), ("pods/status",)),
                rule(READ, ("",), ("services", "replicationcontrollers")),
                rule(READ, ("apps", "extensions"), ("replicasets",)),
                rule(READ, ("apps",), ("statefulsets",)),
                rule(READ, ("policy",), ("poddisruptionbudgets",)),
                rule(READ, ("",), ("persistentvolumeclaims", "persistentvolumes")),
                *REVIEWS,
                rule(READ, ("storage.k8s.io",), ("csinodes", "csidrivers", "csistoragecapacities")),
                rule(READ, ("",), ("namespaces",)),
            ],
        ),
        _cluster_role(
            "system:volume-scheduler",
            [
                rule(("get", "list", "patch", "update", "watch"), ("",), ("persistentvolumes",)),
                rule(READ, ("storage.k8s.io",), ("storageclasses",)),
                rule(
                    ("get", "list", "patch", "update", "watch"), ("",), ("persistentvolumeclaims",)
                ),
            ],
        ),
        _cluster_role(
            "system:kube-controller-manager",
            [
                *EVENTS,
                rule(("create",), ("coordination.k8s.io",), ("leases",)),
                rule(
                    ("get", "update"),
                    ("coordination.k8s.io",),
                    ("leases",),
                    ("kube-controller-manager",),
                ),
                rule(("create",), ("",), ("secrets", "serviceaccounts")),
                rule(("delete",), ("",), ("secrets",)),
                rule(("get",), ("",), ("configmaps", "namespaces", "secrets", "serviceaccounts")),
                rule(("update",), ("",), ("secrets", "serviceaccounts")),
                *REVIEWS,
                rule(("list", "watch"), ("*",), ("*",)),
                rule(("create",), ("",), ("serviceaccounts/token",)),
            ],
        ),
        _seeded(cloud_rbac.cluster_role()),
        _cluster_role(
            "system:kube-dns",
            [
                rule(("list", "watch"), ("",), ("endpoints", "services")),
                rule(("list", "watch"), ("discovery.k8s.io",), ("endpointslices",)),
            ],
        ),
        _cluster_role(
            "system:persistent-volume-provisioner",
            [
                rule(("get", "list", "watch", "create", "delete"), ("",), ("persistentvolumes",)),
                rule(("get", "list", "watch", "update"), ("",), ("persistentvolumeclaims",)),
                rule(READ, ("storage.k8s.io",), ("storageclasses",)),
                rule(("watch",), ("",), ("events",)),
                *EVENTS,
            ],
        ),
        _cluster_role(
            "system:service-account-issuer-discovery",
            [
                url_rule(
                    ("get",),
                    (
                        "/.well-known/openid-configuration",
                        "/.well-known/openid-configuration/",
                        "/openid/v1/jwks",
                        "/openid/v1/jwks/",
                    ),
                )
            ],
        ),
        _cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            [
                rule(
                    ("create",),
                    ("certificates.k8s.io",),
                    ("certificatesigningrequests/nodeclient",),
                )
            ],
        ),
        _cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            [
                rule(
                    ("create",),
                    ("certificates.k8s.io",),
                    ("certificatesigningrequests/selfnodeclient",),
                )
            ],
        ),
        *(
            _cluster_role(
                f"system:certificates.k8s.io:{signer}-approver",
                [
                    rule(
                        ("approve",),
                        ("certificates.k8s.io",),
                        ("signers",),
                        (f"kubernetes.io/{signer}",),
                    )
                ],
            )
            for signer in (
                "kube-apiserver-client",
                "kube-apiserver-client-kubelet",
                "kubelet-serving",
                "legacy-unknown",
            )
        ),
    ]


def _controller_rules() -> dict[str, list[PolicyRule]]:
    """Upstream's ``system:controller:<name>`` rules, for the controllers kubelab runs, by the
    service account each runs as with ``--use-service-account-credentials``."""
    apps = ("apps", "extensions")
    networking = ("networking.k8s.io",)
    admission = ("admissionregistration.k8s.io",)
    return {
        "certificate-controller": [
            rule(
                ("get", "list", "watch", "delete"), (CERTIFICATES,), ("certificatesigningrequests",)
            ),
            rule(
                ("update",),
                (CERTIFICATES,),
                ("certificatesigningrequests/status", "certificatesigningrequests/approval"),
            ),
            rule(
                ("approve",),
                (CERTIFICATES,),
                ("signers",),
                # kubelet-serving: csrapproving's --approve-kubelet-serving-certificates, which
                # also reads Nodes for their addresses (not in upstream's role).
                ("kubernetes.io/kube-apiserver-client-kubelet", "kubernetes.io/kubelet-serving"),
            ),
            rule(("get", "list", "watch"), ("",), ("nodes",)),
            rule(
                ("sign",),
                (CERTIFICATES,),
                ("signers",),
                (
                    "kubernetes.io/legacy-unknown",
                    "kubernetes.io/kube-apiserver-client",
                    "kubernetes.io/kube-apiserver-client-kubelet",
                    "kubernetes.io/kubelet-serving",
                ),
            ),
            rule(("create",), ("authorization.k8s.io",), ("subjectaccessreviews",)),
        ],
        "clusterrole-aggregation-controller": [
            rule(
                ("escalate", "get", "list", "patch", "update", "watch"), (GROUP,), ("clusterroles",)
            ),
        ],
        "cronjob-controller": [
            rule(("get", "list", "watch", "update", "patch"), ("batch",), ("cronjobs",)),
            rule(
                ("get", "list", "watch", "create", "update", "delete", "patch"),
                ("batch",),
                ("jobs",),
            ),
            rule(("update",), ("batch",), ("cronjobs/status", "cronjobs/finalizers")),
            rule(("list", "delete"), ("",), ("pods",)),
        ],
        "daemon-set-controller": [
            rule(READ, apps, ("daemonsets",)),
            rule(("update",), apps, ("daemonsets/status", "daemonsets/finalizers")),
            rule(("list", "watch"), ("",), ("nodes",)),
            rule(("list", "watch", "create", "delete", "patch"), ("",), ("pods",)),
            rule(("create",), ("",), ("pods/binding",)),
            rule(
                ("create", "delete", "get", "list", "patch", "update", "watch"),
                ("apps",),
                ("controllerrevisions",),
            ),
        ],
        "deployment-controller": [
            rule(("get", "list", "watch", "update"), apps, ("deployments",)),
            rule(("update",), apps, ("deployments/status", "deployments/finalizers")),
            rule(
                ("create", "delete", "get", "list", "patch", "update", "watch"),
                apps,
                ("replicasets",),
            ),
            rule(("get", "list", "watch", "update"), ("",), ("pods",)),
        ],
        "disruption-controller": [
            rule(READ, apps, ("deployments", "replicasets")),
            rule(READ, ("",), ("replicationcontrollers",)),
            rule(READ, ("policy",), ("poddisruptionbudgets",)),
            rule(READ, ("apps",), ("statefulsets",)),
            rule(("update",), ("policy",), ("poddisruptionbudgets/status",)),
            rule(("get",), ("*",), ("*/scale",)),
            rule(("patch",), ("",), ("pods/status",)),
        ],
        "endpoint-controller": [
            rule(READ, ("",), ("services", "pods")),
            rule(("get", "list", "create", "update", "delete"), ("",), ("endpoints",)),
            rule(("create",), ("",), ("endpoints/restricted",)),
        ],
        "endpointslice-controller": [
            rule(READ, ("",), ("services", "pods", "nodes")),
            rule(("update",), ("",), ("services/finalizers",)),
            rule(
                ("get", "list", "create", "update", "delete"),
                ("discovery.k8s.io",),
                ("endpointslices",),
            ),
        ],
        "generic-garbage-collector": [
            rule(("get", "list", "watch", "patch", "update", "delete"), ("*",), ("*",)),
        ],
        "horizontal-pod-autoscaler": [
            rule(READ, ("autoscaling",), ("horizontalpodautoscalers",)),
            rule(("update",), ("autoscaling",), ("horizontalpodautoscalers/status",)),
            rule(("get", "update"), ("*",), ("*/scale",)),
            rule(("list",), ("",), ("pods",)),
            rule(("list",), ("metrics.k8s.io",), ("pods",)),
            rule(("get", "list"), ("custom.metrics.k8s.io",), ("*",)),
            rule(("get", "list"), ("external.metrics.k8s.io",), ("*",)),
        ],
        "job-controller": [
            rule(("get", "list", "watch", "update", "patch"), ("batch",), ("jobs",)),
            rule(("update",), ("batch",), ("jobs/status", "jobs/finalizers")),
            rule(("list", "watch", "create", "delete", "patch"), ("",), ("pods",)),
        ],
        "namespace-controller": [
            rule(("get", "list", "watch", "delete"), ("",), ("namespaces",)),
            rule(("update",), ("",), ("namespaces/finalize", "namespaces/status")),
            rule(("get", "list", "delete", "deletecollection"), ("*",), ("*",)),
        ],
        "node-controller": [
            rule(("get", "list", "update", "delete", "patch"), ("",), ("nodes",)),
            rule(("patch", "update"), ("",), ("nodes/status",)),
            rule(("patch", "update"), ("",), ("pods/status",)),
            rule(("list", "delete"), ("",), ("pods",)),
        ],
        "persistent-volume-binder": [
            rule(
                ("create", "delete", "get", "list", "update", "watch"),
                ("",),
                ("persistentvolumes",),
            ),
            rule(("update",), ("",), ("persistentvolumes/status",)),
            rule(("get", "list", "update", "watch"), ("",), ("persistentvolumeclaims",)),
            rule(("update",), ("",), ("persistentvolumeclaims/status",)),
            rule(("get", "list", "watch", "delete"), ("",), ("pods",)),
            rule(READ, ("storage.k8s.io",), ("storageclasses",)),
            rule(("watch",), ("",), ("events",)),
        ],
        "pod-garbage-collector": [
            rule(("list", "watch", "delete"), ("",), ("pods",)),
            rule(READ, ("",), ("nodes",)),
            rule(("patch",), ("",), ("pods/status",)),
        ],
        "replicaset-controller": [
            rule(("get", "list", "watch", "update"), apps, ("replicasets",)),
            rule(("update",), apps, ("replicasets/status", "replicasets/finalizers")),
            rule(("list", "watch", "patch", "create", "delete"), ("",), ("pods",)),
        ],
        "replication-controller": [
            rule(("get", "list", "watch", "update"), ("",), ("replicationcontrollers",)),
            rule(
                ("update",),
                ("",),
                ("replicationcontrollers/status", "replicationcontrollers/finalizers"),
            ),
            rule(("list", "watch", "patch", "create", "delete"), ("",), ("pods",)),
        ],
        "resourcequota-controller": [
            rule(("list", "watch"), ("*",), ("*",)),
            rule(("update",), ("",), ("resourcequotas/status",)),
        ],
        "root-ca-cert-publisher": [rule(("create", "update"), ("",), ("configmaps",))],
        "service-account-controller": [rule(("create",), ("",), ("serviceaccounts",))],
        "service-cidrs-controller": [
            rule(("get", "list", "watch", "patch", "update"), networking, ("servicecidrs",)),
            rule(("patch", "update"), networking, ("servicecidrs/finalizers",)),
            rule(("patch", "update"), networking, ("servicecidrs/status",)),
            rule(("get", "list", "watch"), networking, ("ipaddresses",)),
        ],
        "statefulset-controller": [
            rule(("list", "watch"), ("",), ("pods",)),
            rule(("list", "watch"), ("apps",), ("statefulsets",)),
            rule(("get",), ("apps",), ("statefulsets",)),
            rule(("update",), ("apps",), ("statefulsets/status", "statefulsets/finalizers")),
            rule(("get", "create", "delete", "update", "patch"), ("",), ("pods",)),
            rule(
                ("get", "create", "delete", "update", "patch", "list", "watch"),
                ("apps",),
                ("controllerrevisions",),
            ),
            rule(("get", "create"), ("",), ("persistentvolumeclaims",)),
            rule(("update", "delete", "patch"), ("",), ("persistentvolumeclaims",)),
        ],
        "ttl-after-finished-controller": [
            rule(("get", "list", "watch", "delete"), ("batch",), ("jobs",))
        ],
        "pvc-protection-controller": [
            rule(("get", "list", "watch", "update"), ("",), ("persistentvolumeclaims",)),
            rule(("list", "watch", "get"), ("",), ("pods",)),
        ],
        "pv-protection-controller": [
            rule(("get", "list", "watch", "update"), ("",), ("persistentvolumes",)),
        ],
        "taint-eviction-controller": [
            rule(("list", "watch", "get", "delete"), ("",), ("pods",)),
            rule(("patch",), ("",), ("pods/status",)),
            rule(READ, ("",), ("nodes",)),
        ],
        "validatingadmissionpolicy-status-controller": [
            rule(READ, admission, ("validatingadmissionpolicies",)),
            rule(("get", "patch", "update"), admission, ("validatingadmissionpolicies/status",)),
        ],
    }


def controller_roles() -> list[ClusterRole]:
    return [
        _cluster_role(f"system:controller:{name}", [*rules, *EVENTS])
        for name, rules in _controller_rules().items()
    ]


def cluster_role_bindings() -> list[ClusterRoleBinding]:
    """Upstream's bootstrap ClusterRoleBindings."""
    authenticated, unauthenticated = (
        _group("system:authenticated"),
        _group("system:unauthenticated"),
    )
    return [
        _binding("cluster-admin", "cluster-admin", [_group("system:masters")]),
        _binding("system:monitoring", "system:monitoring", [_group("system:monitoring")]),
        _binding("system:discovery", "system:discovery", [authenticated]),
        _binding("system:basic-user", "system:basic-user", [authenticated]),
        _binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            [authenticated, unauthenticated],
        ),
        _binding("system:node-proxier", "system:node-proxier", [_user("system:kube-proxy")]),
        _binding(
            "system:kube-controller-manager",
            "system:kube-controller-manager",
            [_user("system:kube-controller-manager")],
        ),
        _binding(
            "system:cloud-controller-manager",
            "system:cloud-controller-manager",
            [_user("system:cloud-controller-manager")],
        ),
        _binding(
            "system:kube-dns",
            "system:kube-dns",
            [Subject(kind="ServiceAccount", name="kube-dns", namespace="kube-system")],
        ),
        _binding(
            "system:kube-scheduler", "system:kube-scheduler", [_user("system:kube-scheduler")]
        ),
        _binding(
            "system:volume-scheduler", "system:volume-scheduler", [_user("system:kube-scheduler")]
        ),
        _binding("system:node", "system:node", []),
        _binding(
            "system:service-account-issuer-discovery",
            "system:service-account-issuer-discovery",
            [_group("system:serviceaccounts")],
        ),
        # Not upstream's bootstrap policy but kubeadm's, for the same TLS bootstrapping: nodes
        # joining with a kubelab bootstrap token may ask for a client certificate and have it
        # approved, and nodes may renew their own.
        _binding(
            "kubelab:kubelet-bootstrap",
            "system:node-bootstrapper",
            [_group(BOOTSTRAP_TOKEN_GROUP)],
        ),
        _binding(
            "kubelab:node-autoapprove-bootstrap",
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            [_group(BOOTSTRAP_TOKEN_GROUP)],
        ),
        _binding(
            "kubelab:node-autoapprove-certificate-rotation",
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            [_group("system:nodes")],
        ),
        _binding(
            "kubelab:kube-apiserver-kubelet-client",
            "system:kubelet-api-admin",
            [_user("kube-apiserver-kubelet-client")],
        ),
        *(
            _binding(
                f"system:controller:{name}",
                f"system:controller:{name}",
                [Subject(kind="ServiceAccount", name=name, namespace="kube-system")],
            )
            for name in _controller_rules()
        ),
    ]


KUBE_PUBLIC = clusterinfo.NAMESPACE
CLUSTER_INFO_READER = "kubelab:bootstrap-signer-clusterinfo"
"""kubeadm's ``kubeadm:bootstrap-signer-clusterinfo``: anyone may read cluster-info."""


def namespace_roles() -> list[Role]:
    """Upstream's bootstrap Roles (``NamespaceRoles``), and kubeadm's cluster-info reader."""
    leader_locking = [
        rule(("create", "get", "list", "update", "watch"), ("coordination.k8s.io",), (resource,))
        for resource in ("leases", "leasecandidates")
    ]
    configmaps = ("configmaps",)
    return [
        Role(
            metadata=_meta("system:controller:bootstrap-signer", KUBE_PUBLIC),
            rules=[
                rule(READ, ("",), configmaps),
                rule(("update",), ("",), configmaps, (clusterinfo.NAME,)),
                *EVENTS,
            ],
        ),
        Role(
            metadata=_meta(CLUSTER_INFO_READER, KUBE_PUBLIC),
            rules=[rule(("get",), ("",), configmaps, (clusterinfo.NAME,))],
        ),
        Role(
            metadata=_meta("extension-apiserver-authentication-reader", KUBE_SYSTEM),
            rules=[rule(READ, ("",), configmaps, ("extension-apiserver-authentication",))],
        ),
        Role(
            metadata=_meta("system::leader-locking-kube-controller-manager", KUBE_SYSTEM),
            rules=leader_locking,
        ),
        Role(
            metadata=_meta("system::leader-locking-kube-scheduler", KUBE_SYSTEM),
            rules=leader_locking,
        ),
        Role(
            metadata=_meta("system:controller:bootstrap-signer", KUBE_SYSTEM),
            rules=[rule(READ, ("",), ("secrets",))],
        ),
        Role(
            metadata=_meta("system:controller:cloud-provider", KUBE_SYSTEM),
            rules=[rule(("create", "get", "list", "watch"), ("",), configmaps)],
        ),
        Role(
            metadata=_meta("system:controller:token-cleaner", KUBE_SYSTEM),
            rules=[rule(("delete", "get", "list", "watch"), ("",), ("secrets",)), *EVENTS],
        ),
    ]


def namespace_role_bindings() -> list[RoleBinding]:
    """Upstream's bootstrap RoleBindings, and kubeadm's of the cluster-info reader."""

    def bound(name: str, namespace: str, role: str, subjects: Sequence[Subject]) -> RoleBinding:
        return RoleBinding(
            metadata=_meta(name, namespace),
            role_ref=RoleRef(api_group=GROUP, kind="Role", name=role),
            subjects=list(subjects),
        )

    controller_manager, scheduler = (
        _user("system:kube-controller-manager"),
        _user("system:kube-scheduler"),
    )
    return [
        bound(
            "system:controller:bootstrap-signer",
            KUBE_PUBLIC,
            "system:controller:bootstrap-signer",
            [_service_account("bootstrap-signer")],
        ),
        bound(
            CLUSTER_INFO_READER,
            KUBE_PUBLIC,
            CLUSTER_INFO_READER,
            [_user("system:anonymous")],
        ),
        bound(
            "system::extension-apiserver-authentication-reader",
            KUBE_SYSTEM,
            "extension-apiserver-authentication-reader",
            [controller_manager, scheduler],
        ),
        bound(
            "system::leader-locking-kube-controller-manager",
            KUBE_SYSTEM,
            "system::leader-locking-kube-controller-manager",
            [
                controller_manager,
                _service_account("kube-controller-manager"),
                _service_account("leader-election-controller"),
            ],
        ),
        bound(
            "system::leader-locking-kube-scheduler",
            KUBE_SYSTEM,
            "system::leader-locking-kube-scheduler",
            [scheduler, _service_account("kube-scheduler")],
        ),
        *(
            bound(
                f"system:controller:{name}",
                KUBE_SYSTEM,
                f"system:controller:{name}",
                [_service_account(name)],
            )
            for name in ("bootstrap-signer", "cloud-provider", "token-cleaner")
        ),
    ]
