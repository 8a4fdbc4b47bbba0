"""The cloud-controller-manager's ClusterRole, as the cloud-controller-manager documentation
lists it (``concepts/architecture/cloud-controller``, "Authorization").

Data only: the security work binds it to the component's own identity and enforces it.  The
node controllers need full access to Nodes and may patch ``nodes/status``; the service
controller lists, watches, patches and updates Services (and their status, where it writes
``status.loadBalancer``); every controller records Events; the rest is what the document
grants for service accounts, persistent volumes and Endpoints.  ``services/status`` and
``coordination.k8s.io/leases`` go beyond the document's example: this component writes the
former and elects its leader through the latter, as upstream's bootstrap policy allows.
"""

from __future__ import annotations

from kube.api.kinds.rbac_v1 import ClusterRole, PolicyRule
from kube.api.meta_v1 import ObjectMeta

NAME = "system:cloud-controller-manager"


def _rule(resources: list[str], verbs: list[str], group: str = "") -> PolicyRule:
    return PolicyRule(api_groups=[group], resources=resources, verbs=verbs)


def cluster_role() -> ClusterRole:
    """A fresh copy of the ClusterRole (callers may mutate it)."""
    return ClusterRole(
        metadata=ObjectMeta(name=NAME, labels={"kubernetes.io/bootstrapping": "rbac-defaults"}),
        rules=[
            _rule(["events"], ["create", "patch", "update"]),
            _rule(["nodes"], ["*"]),
            _rule(["nodes/status"], ["patch"]),
            _rule(["services"], ["list", "patch", "update", "watch"]),
            _rule(["services/status"], ["patch", "update"]),
            _rule(["serviceaccounts"], ["create"]),
            _rule(["persistentvolumes"], ["get", "list", "update", "watch"]),
            _rule(["endpoints"], ["create", "get", "list", "watch", "update"]),
            _rule(["leases"], ["create", "get", "update"], group="coordination.k8s.io"),
        ],
    )
