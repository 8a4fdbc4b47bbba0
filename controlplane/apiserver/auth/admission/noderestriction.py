"""NodeRestriction: a kubelet may change only what belongs to its own node.

The Node authorizer decides which *kinds* of write a kubelet (user ``system:node:<name>`` in
group ``system:nodes``) may make; this plugin checks the objects themselves, as upstream's:

- **Node**: only its own; it may not create itself with a ``configSource``, change its own
  taints (which would steer forbidden workloads to it), nor set labels in the
  ``kubernetes.io`` / ``k8s.io`` namespaces other than the kubelet's own (hostname, os, arch,
  instance type, zone, region and the ``kubelet.kubernetes.io`` / ``node.kubernetes.io``
  prefixes), nor any ``node-restriction.kubernetes.io`` label, which exists precisely so that
  workloads can trust labels a kubelet cannot set;
- **Pod**: it creates only mirror pods bound to itself, owned (if at all) by its own Node and
  referencing no service account, secret, configmap or claim; it deletes, evicts and updates
  the status of only pods bound to itself;
- **serviceaccounts/token**: only tokens bound to a pod that runs on it, by the pod's current
  UID;
- **CSINode**: only the one named after it.

The pods a token names are read from a watch cache (falling back to the store on a miss).
"""

from __future__ import annotations

from collections.abc import Callable

from controlplane.apiserver import errors
from controlplane.apiserver.registry.store import Admission, RequestContext
from controlplane.apiserver.storage.watchcache import WatchCache
from kube.api.kinds.authentication_v1 import TokenRequest
from kube.api.kinds.core_v1.node import (
    Node,
    in_label_namespace,
    is_kubelet_label,
    is_reserved_label,
)
from kube.api.kinds.core_v1.pod import MIRROR_POD_ANNOTATION, Pod
from kube.api.kinds.storage_v1 import CSINode
from kube.api.meta_v1 import Resource
from kube.api.scheme import KindInfo

NODE_USER_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"
RESTRICTED_PREFIX = "node-restriction.kubernetes.io"

_Refuse = Callable[[str], errors.ApiError]


def node_restriction(pods: WatchCache) -> Admission:
    async def admit(
        operation: str, info: KindInfo, obj: Resource, old: Resource | None, ctx: RequestContext
    ) -> None:
        if NODES_GROUP not in ctx.groups:
            return
        name = obj.metadata.name or ""
        node = ctx.user.removeprefix(NODE_USER_PREFIX)
        if not ctx.user.startswith(NODE_USER_PREFIX) or not node:
            raise errors.forbidden(info, name, f"could not determine node from user {ctx.user!r}")

        def refuse(message: str) -> errors.ApiError:
            return errors.forbidden(
                info, name, f'{info.group_resource} "{name}" is forbidden: {message}'
            )

        if isinstance(obj, Node):
            _check_node(node, operation, obj, old, refuse)
        elif isinstance(obj, Pod):
            _check_pod(node, operation, ctx.subresource, obj, refuse)
        elif isinstance(obj, TokenRequest) and ctx.subresource == "token":
            await _check_token(node, obj, pods, refuse)
        elif isinstance(obj, CSINode) and name != node:
            raise refuse("can only access CSINode with the same name as the requesting node")

    return admit


def _check_node(
    node: str, operation: str, obj: Node, old: Resource | None, refuse: _Refuse
) -> None:
    requested = obj.metadata.name or ""
    if requested != node:
        raise refuse(f'node "{node}" is not allowed to modify node "{requested}"')
    if operation == "CREATE":
        if obj.spec is not None and obj.spec.config_source is not None:
            raise refuse(f'node "{node}" is not allowed to create pods with a non-nil configSource')
        forbidden = _forbidden_labels(_modified_labels(obj.metadata.labels, None))
        if forbidden:
            raise refuse(
                f'node "{node}" is not allowed to set the following labels: ' + ", ".join(forbidden)
            )
    elif operation == "UPDATE" and isinstance(old, Node):
        config = obj.spec.config_source if obj.spec else None
        old_config = old.spec.config_source if old.spec else None
        if config is not None and config != old_config:
            raise refuse(
                f'node "{node}" is not allowed to update configSource to a new non-nil configSource'
            )
        taints = (obj.spec.taints if obj.spec else None) or []
        old_taints = (old.spec.taints if old.spec else None) or []
        if taints != old_taints:
            raise refuse(f'node "{node}" is not allowed to modify taints')
        forbidden = _forbidden_labels(_modified_labels(obj.metadata.labels, old.metadata.labels))
        if forbidden:
            raise refuse("is not allowed to modify labels: " + ", ".join(forbidden))


def _modified_labels(new: dict[str, str] | None, old: dict[str, str] | None) -> set[str]:
    new, old = new or {}, old or {}
    return {k for k in new.keys() | old.keys() if new.get(k) != old.get(k)}


def _forbidden_labels(keys: set[str]) -> list[str]:
    return sorted(
        key
        for key in keys
        if in_label_namespace(key, RESTRICTED_PREFIX)
        or (is_reserved_label(key) and not is_kubelet_label(key))
    )


def _check_pod(node: str, operation: str, subresource: str, pod: Pod, refuse: _Refuse) -> None:
    bound = (pod.spec.node_name if pod.spec else None) or ""
    if subresource == "":
        if operation == "CREATE":
            _check_mirror_pod(node, pod, refuse)
        elif operation == "DELETE":
            if bound != node:
                raise refuse(f'node "{node}" can only delete pods with spec.nodeName set to itself')
        else:
            raise refuse(
                f'unexpected operation "{operation}", node "{node}" can only create and delete '
                "mirror pods"
            )
    elif subresource == "status":
        if bound != node:
            raise refuse(
                f'node "{node}" can only update pod status for pods with spec.nodeName set to '
                "itself"
            )
    elif subresource == "eviction":
        if bound != node:
            raise refuse(f"node {node} can only evict pods with spec.nodeName set to itself")
    else:
        raise refuse(f'unexpected subresource "{subresource}", node "{node}" may not change it')


def _check_mirror_pod(node: str, pod: Pod, refuse: _Refuse) -> None:
    if MIRROR_POD_ANNOTATION not in (pod.metadata.annotations or {}):
        raise refuse(
            f'pod does not have "{MIRROR_POD_ANNOTATION}" annotation, node "{node}" can only '
            "create mirror pods"
        )
    spec = pod.spec
    if spec is None or spec.node_name != node:
        raise refuse(f'node "{node}" can only create pods with spec.nodeName set to itself')
    owners = pod.metadata.owner_references or []
    if len(owners) > 1:
        raise refuse(
            f'node "{node}" can only create pods with a single owner reference set to itself'
        )
    if owners:
        owner = owners[0]
        if (owner.api_version, owner.kind, owner.name) != ("v1", "Node", node):
            raise refuse(
                f'node "{node}" can only create pods with an owner reference set to itself'
            )
        if not owner.controller:
            raise refuse(
                f'node "{node}" can only create pods with a controller owner reference set to '
                "itself"
            )
        if owner.block_owner_deletion:
            raise refuse(f'node "{node}" must not set blockOwnerDeletion on an owner reference')
    if spec.service_account_name:
        raise refuse(f'node "{node}" can not create pods that reference a service account')
    containers = [*(spec.init_containers or ()), *(spec.containers or ())]
    env = [e.value_from for c in containers for e in c.env or () if e.value_from is not None]
    env_from = [f for c in containers for f in c.env_from or ()]
    projections = [
        s for v in spec.volumes or () if v.projected is not None for s in v.projected.sources or ()
    ]
    if (
        spec.image_pull_secrets
        or any(v.secret is not None for v in spec.volumes or ())
        or any(e.secret_key_ref is not None for e in env)
        or any(f.secret_ref is not None for f in env_from)
        or any(p.secret is not None for p in projections)
    ):
        raise refuse(f'node "{node}" can not create pods that reference secrets')
    if (
        any(v.config_map is not None for v in spec.volumes or ())
        or any(e.config_map_key_ref is not None for e in env)
        or any(f.config_map_ref is not None for f in env_from)
        or any(p.config_map is not None for p in projections)
    ):
        raise refuse(f'node "{node}" can not create pods that reference configmaps')
    if any(v.persistent_volume_claim is not None for v in spec.volumes or ()):
        raise refuse(f'node "{node}" can not create pods that reference persistentvolumeclaims')


async def _check_token(node: str, request: TokenRequest, pods: WatchCache, refuse: _Refuse) -> None:
    ref = request.spec.bound_object_ref if request.spec else None
    if ref is None or ref.kind != "Pod":
        raise refuse("node requested token not bound to a pod")
    pod = await pods.lookup(request.metadata.namespace or "", ref.name or "")
    if not isinstance(pod, Pod):
        raise refuse("node requested token bound to a pod that does not exist")
    if ref.uid != pod.metadata.uid:
        raise refuse(
            f"the UID in the bound object reference ({ref.uid}) does not match the UID in "
            "record. The object might have been deleted and then recreated"
        )
    if (pod.spec.node_name if pod.spec else None) != node:
        raise refuse("node requested token bound to a pod scheduled on a different node")
