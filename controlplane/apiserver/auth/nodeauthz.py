"""The Node authorizer: what a kubelet (``system:node:<name>`` in ``system:nodes``) may reach.

Upstream's rules, read from the server's watch caches instead of a separately maintained
graph (the pods bound to a node *are* the graph's edges; walking them in memory is cheap at
this scale and can never disagree with the caches):

- its own Node: get, list/watch with ``fieldSelector=metadata.name=<node>``, create, update,
  patch, delete, ``nodes/status``; another Node: nothing;
- pods bound to it: get, delete, ``pods/status``, ``pods/eviction``; list/watch only with
  ``fieldSelector=spec.nodeName=<node>``; create (mirror pods);
- secrets, configmaps and PVCs referenced by those pods (volumes, projected sources, env,
  envFrom, image pull secrets, ephemeral volumes' claims), and the PVs those claims are bound
  to: get, and list/watch narrowed to one name with ``fieldSelector=metadata.name=<name>``;
- ``serviceaccounts/token`` of the service accounts those pods run as;
- its own Lease in ``kube-node-lease``;
- its own CSINode: get, create, update, patch, delete (a create names no object, so
  NodeRestriction checks the name); never list or watch;
- everything else the ``system:node`` ClusterRole lists (events, services, CSRs, ...).

Anything else is no opinion, so RBAC may still grant it (upstream binds ``system:node`` to no
one, so a kubelet gets nothing beyond this).  What a node may *write* into its own objects
(labels, the pods it creates) is NodeRestriction admission's business, not this one's.
"""

from __future__ import annotations

from collections.abc import Iterator

from controlplane.apiserver.auth import User
from controlplane.apiserver.auth.rbac import Listing, rule_allows
from controlplane.apiserver.endpoints.requestinfo import RequestInfo
from kube.api.fieldselector import FieldSelectorError, parse_field_selector
from kube.api.kinds.core_v1.pod import Pod
from kube.api.kinds.core_v1.volume import PersistentVolumeClaim
from kube.api.kinds.rbac_v1 import PolicyRule

NODES_GROUP = "system:nodes"
NODE_PREFIX = "system:node:"
LEASE_NAMESPACE = "kube-node-lease"
_READ = ("get", "list", "watch")


def node_name(user: User) -> str | None:
    """The node a user is the kubelet of, if any."""
    if NODES_GROUP not in user.groups or not user.name.startswith(NODE_PREFIX):
        return None
    return user.name.removeprefix(NODE_PREFIX) or None


def pod_references(pod: Pod) -> dict[str, set[str]]:
    """Names of the secrets, configmaps, PVCs and service account a pod uses, by resource."""
    refs: dict[str, set[str]] = {
        "secrets": set(),
        "configmaps": set(),
        "persistentvolumeclaims": set(),
        "serviceaccounts": set(),
    }
    spec = pod.spec
    if spec is None:
        return refs
    refs["serviceaccounts"].add(spec.service_account_name or "default")
    refs["secrets"].update(r.name for r in spec.image_pull_secrets or () if r.name)
    for volume in spec.volumes or ():
        if volume.secret is not None and volume.secret.secret_name:
            refs["secrets"].add(volume.secret.secret_name)
        if volume.config_map is not None and volume.config_map.name:
            refs["configmaps"].add(volume.config_map.name)
        if volume.persistent_volume_claim is not None and volume.persistent_volume_claim.claim_name:
            refs["persistentvolumeclaims"].add(volume.persistent_volume_claim.claim_name)
        if volume.ephemeral is not None and pod.metadata.name:
            refs["persistentvolumeclaims"].add(f"{pod.metadata.name}-{volume.name}")
        for source in volume.projected.sources or () if volume.projected is not None else ():
            if source.secret is not None and source.secret.name:
                refs["secrets"].add(source.secret.name)
            if source.config_map is not None and source.config_map.name:
                refs["configmaps"].add(source.config_map.name)
    containers = (
        *(spec.init_containers or ()),
        *(spec.containers or ()),
        *(spec.ephemeral_containers or ()),
    )
    for container in containers:
        for env in container.env or ():
            source = env.value_from
            if source is None:
                continue
            if source.secret_key_ref is not None and source.secret_key_ref.name:
                refs["secrets"].add(source.secret_key_ref.name)
            if source.config_map_key_ref is not None and source.config_map_key_ref.name:
                refs["configmaps"].add(source.config_map_key_ref.name)
        for env_from in container.env_from or ():
            if env_from.secret_ref is not None and env_from.secret_ref.name:
                refs["secrets"].add(env_from.secret_ref.name)
            if env_from.config_map_ref is not None and env_from.config_map_ref.name:
                refs["configmaps"].add(env_from.config_map_ref.name)
    return refs


class NodeAuthorizer:
    """Allows a kubelet exactly what its own node's pods need; no opinion for anyone else."""

    def __init__(self, pods: Listing, claims: Listing, node_rules: list[PolicyRule]) -> None:
        self.pods = pods
        self.claims = claims
        self.node_rules = node_rules

    def __call__(self, user: User, info: RequestInfo) -> bool:
        node = node_name(user)
        if node is None:
            return False
        if info.is_resource_request and (info.group, info.resource) == (
            "storage.k8s.io",
            "csinodes",
        ):
            return self._csinode(node, info)
        if not info.is_resource_request or info.group not in ("", "coordination.k8s.io"):
            return self._by_rules(info)
        resource = info.resource
        if resource == "nodes":
            return self._own_node(node, info)
        if resource == "pods":
            return self._pods(node, info)
        if resource in ("secrets", "configmaps", "persistentvolumeclaims", "persistentvolumes"):
            return self._referenced(node, info)
        if resource == "serviceaccounts" and info.subresource == "token":
            return info.verb == "create" and info.name in self._used(
                node, info.namespace, "serviceaccounts"
            )
        if resource == "leases" and info.group == "coordination.k8s.io":
            return (
                info.namespace == LEASE_NAMESPACE
                and (info.name == node or (info.verb == "create" and not info.name))
                and self._by_rules(info)
            )
        return self._by_rules(info)

    def rules_for(self, user: User, namespace: str) -> tuple[list[PolicyRule], bool]:
        """A kubelet's rules depend on each object, so the list is never complete."""
        return (list(self.node_rules), True) if node_name(user) is not None else ([], False)

    def _by_rules(self, info: RequestInfo) -> bool:
        return any(rule_allows(rule, info) for rule in self.node_rules)

    def _own_node(self, node: str, info: RequestInfo) -> bool:
        if info.subresource not in ("", "status"):
            return False
        if info.verb in ("list", "watch"):
            return _selected(info, "metadata.name") == node
        if info.verb == "create":
            return not info.subresource
        return info.name == node and info.verb in ("get", "update", "patch", "delete")

    def _csinode(self, node: str, info: RequestInfo) -> bool:
        if info.subresource or info.verb not in ("get", "create", "update", "patch", "delete"):
            return False
        return (info.verb == "create" or info.name == node) and self._by_rules(info)

    def _pods(self, node: str, info: RequestInfo) -> bool:
        if info.verb in ("list", "watch"):
            return not info.subresource and _selected(info, "spec.nodeName") == node
        if info.verb == "create" and not info.name:
            return True
        allowed = {
            "": ("get", "delete"),
            "status": ("get", "update", "patch"),
            "eviction": ("create",),
        }
        if info.verb not in allowed.get(info.subresource, ()):
            return False
        pod = self.pods.get(info.namespace, info.name)
        return isinstance(pod, Pod) and pod.spec is not None and pod.spec.node_name == node

    def _referenced(self, node: str, info: RequestInfo) -> bool:
        if info.subresource or info.verb not in _READ:
            return False
        name = info.name if info.verb == "get" else _selected(info, "metadata.name")
        if not name:
            return False
        if info.resource == "persistentvolumes":
            return name in self._bound_volumes(node)
        return name in self._used(node, info.namespace, info.resource)

    def _node_pods(self, node: str, namespace: str | None = None) -> Iterator[Pod]:
        for pod in self.pods.objects():
            if (
                isinstance(pod, Pod)
                and pod.spec is not None
                and pod.spec.node_name == node
                and (namespace is None or pod.metadata.namespace == namespace)
            ):
                yield pod

    def _used(self, node: str, namespace: str, resource: str) -> set[str]:
        used: set[str] = set()
        for pod in self._node_pods(node, namespace):
            used |= pod_references(pod)[resource]
        return used

    def _bound_volumes(self, node: str) -> set[str]:
        volumes: set[str] = set()
        for pod in self._node_pods(node):
            namespace = pod.metadata.namespace or ""
            for claim_name in pod_references(pod)["persistentvolumeclaims"]:
                claim = self.claims.get(namespace, claim_name)
                spec = claim.spec if isinstance(claim, PersistentVolumeClaim) else None
                if spec is not None and spec.volume_name:
                    volumes.add(spec.volume_name)
        return volumes


def _selected(info: RequestInfo, field: str) -> str | None:
    try:
        return parse_field_selector(info.field_selector).value_for(field)
    except FieldSelectorError:
        return None
