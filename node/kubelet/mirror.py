"""Mirror pods: how static pods show in the API, as upstream's ``pkg/kubelet/pod/mirror_client.go``
and the mirror handling of ``syncPod`` and ``HandlePodCleanups``.

A static pod runs from a file the API server never sees; its mirror pod is a copy the kubelet
creates in the API so that ``kubectl get pods`` (and the scheduler's accounting) knows of it.
The mirror carries ``kubernetes.io/config.mirror`` set to the static pod's
``kubernetes.io/config.hash`` and is owned (controller) by this node's Node object, so the
garbage collector removes it when the Node goes.  It is never the source of truth: a mirror
whose hash differs from its static pod's, or that someone began deleting, is deleted and made
again, and a mirror without a static pod is deleted.  Deletions use grace period 0 (the pod is
the kubelet's own record, nothing runs for it), with the UID as precondition where the mirror
seen is the one meant.

``reconcile`` is level-triggered: given every static pod the kubelet keeps (those still
terminating included) and every pod bound to this node, it makes the API agree.  It is
idempotent, and a failure for one pod is logged and left for the next call.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence

from kube.api.kinds.core_v1.node import Node
from kube.api.kinds.core_v1.pod import MIRROR_POD_ANNOTATION, Pod
from kube.api.meta_v1 import OwnerReference
from kube.client.errors import ApiError, ClientError
from kube.client.interface import ApiClient
from node.kubelet.staticpods import CONFIG_HASH_ANNOTATION, is_static_pod
from node.kubelet.statusmanager import delete_pod_now

log = logging.getLogger("kubelab.kubelet.mirror")


def is_mirror_pod(pod: Pod) -> bool:
    """Whether the pod is the API's copy of a static pod."""
    return MIRROR_POD_ANNOTATION in (pod.metadata.annotations or {})


def static_hash(pod: Pod) -> str | None:
    """The hash a static pod's source gave it (its ``kubernetes.io/config.hash``)."""
    return (pod.metadata.annotations or {}).get(CONFIG_HASH_ANNOTATION)


def mirror_hash(pod: Pod) -> str | None:
    """The hash of the static pod a mirror pod was made from."""
    return (pod.metadata.annotations or {}).get(MIRROR_POD_ANNOTATION)


def is_mirror_of(mirror: Pod, static: Pod) -> bool:
    """Whether ``mirror`` is an up-to-date mirror of ``static`` (upstream ``IsMirrorPodOf``)."""
    return (
        mirror.metadata.namespace == static.metadata.namespace
        and mirror.metadata.name == static.metadata.name
        and mirror_hash(mirror) is not None
        and mirror_hash(mirror) == static_hash(static)
    )


def mirror_pod(static: Pod, node_name: str, node_uid: str) -> Pod:
    """The mirror pod to create for ``static``: a copy with the mirror annotation, owned by the
    Node, and without what the API server assigns (UID, resourceVersion, status)."""
    hash_ = static_hash(static)
    if hash_ is None:
        raise ValueError(f"pod {static.metadata.name} has no {CONFIG_HASH_ANNOTATION} annotation")
    mirror = copy.deepcopy(static)
    meta = mirror.metadata
    meta.uid = None
    meta.resource_version = None
    meta.creation_timestamp = None
    meta.deletion_timestamp = None
    meta.deletion_grace_period_seconds = None
    meta.managed_fields = None
    meta.annotations = {**(meta.annotations or {}), MIRROR_POD_ANNOTATION: hash_}
    meta.owner_references = [
        OwnerReference(api_version="v1", kind="Node", name=node_name, uid=node_uid, controller=True)
    ]
    mirror.status = None
    return mirror


class MirrorClient:
    """Creates and deletes this node's mirror pods through the API."""

    def __init__(self, client: ApiClient, node_name: str) -> None:
        self.client = client
        self.node_name = node_name

    async def create(self, static: Pod) -> bool:
        """Create the mirror of ``static``; whether one was created.

        The Node is read for its UID each time, so a re-registered Node owns the new mirrors.
        Nothing is created while the Node is being deleted (the garbage collector would only
        remove it), nor when a pod of that name exists already (AlreadyExists; ``reconcile``
        deals with a stale one).  Other failures raise ``ApiError`` or ``ClientError``.
        """
        node = await self.client.get(Node, self.node_name)
        if node.metadata.deletion_timestamp is not None:
            log.info("not creating mirror pod %s/%s: node is being deleted", *_key(static))
            return False
        mirror = mirror_pod(static, self.node_name, node.metadata.uid or "")
        try:
            await self.client.create(mirror)
        except ApiError as error:
            if error.already_exists:
                return False
            raise
        log.info("created mirror pod %s/%s", *_key(static))
        return True

    async def delete(self, namespace: str, name: str, uid: str | None = None) -> bool:
        """Delete a mirror pod at once, only if its UID is still ``uid`` when one is given;
        whether it was deleted (False: it was gone, or is another pod now).  Other failures
        raise ``ApiError`` or ``ClientError``."""
        if not await delete_pod_now(self.client, namespace, name, uid):
            return False
        log.info("deleted mirror pod %s/%s", namespace, name)
        return True

    async def reconcile(self, static: Sequence[Pod], mirrors: Sequence[Pod]) -> None:
        """Make the API's mirror pods match the static pods.

        ``static``: the static pods the kubelet keeps (others are ignored); ``mirrors``: pods
        seen in the API (only mirror pods bound to this node are considered).  Missing mirrors
        are created, stale or deleting ones replaced, orphans deleted.
        """
        wanted = {_key(pod): pod for pod in static if is_static_pod(pod)}
        existing = {
            _key(pod): pod
            for pod in mirrors
            if is_mirror_pod(pod) and pod.spec is not None and pod.spec.node_name == self.node_name
        }
        for key, pod in wanted.items():
            mirror = existing.get(key)
            try:
                if mirror is not None and (
                    mirror.metadata.deletion_timestamp is not None or not is_mirror_of(mirror, pod)
                ):
                    await self.delete(*key, uid=mirror.metadata.uid)
                    mirror = None
                if mirror is None:
                    await self.create(pod)
            except (ApiError, ClientError) as error:
                log.warning("mirror pod %s/%s: %s", *key, error)
        for key, mirror in existing.items():
            if key in wanted:
                continue
            try:
                await self.delete(*key, uid=mirror.metadata.uid)
            except (ApiError, ClientError) as error:
                log.warning("deleting orphaned mirror pod %s/%s: %s", *key, error)


def _key(pod: Pod) -> tuple[str, str]:
    return pod.metadata.namespace or "", pod.metadata.name or ""
