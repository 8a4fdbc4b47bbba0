"""The root-ca-cert-publisher: a ``kube-root-ca.crt`` ConfigMap in every active namespace.

Pods verify the API server with it (projected service account volumes mount it), so its
``ca.crt`` must always be the cluster CA: the PEM of the kubeconfig this controller-manager's
client was built from.  Keys are namespaces.  A namespace is synced when it appears or
changes while active, and when its ConfigMap is edited or deleted, so a user's edit is put
back and a deleted ConfigMap comes back.  The ConfigMap also carries upstream's
``kubernetes.io/description`` annotation saying what it is for.  Terminating namespaces are
skipped: the namespace controller is emptying them and the API server refuses new content.
"""

from __future__ import annotations

import copy
from typing import Any

from controlplane.controllers.context import ControllerContext
from controlplane.controllers.controller import Controller, unwrap
from kube.api.kinds.core_v1.cluster import ConfigMap, Namespace
from kube.api.meta_v1 import ObjectMeta
from kube.client.errors import ApiError

NAME = "root-ca-cert-publisher"
CONFIGMAP_NAME = "kube-root-ca.crt"
CA_KEY = "ca.crt"
DESCRIPTION_ANNOTATION = "kubernetes.io/description"
DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters."
)


def terminating(namespace: Namespace) -> bool:
    """Whether a namespace is being deleted (marked, or already in phase Terminating)."""
    if namespace.metadata.deletion_timestamp is not None:
        return True
    return namespace.status is not None and namespace.status.phase == "Terminating"


class RootCACertPublisher(Controller):
    NAME = NAME

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        pem = ctx.client.config.ca_pem
        self.root_ca = pem.decode() if pem else ""
        self.namespaces = ctx.informers.informer_for(Namespace)
        self.configmaps = ctx.informers.informer_for(ConfigMap)
        self.namespaces.add_event_handler(self.enqueue, self._namespace_updated)
        self.configmaps.add_event_handler(
            self._configmap_changed, self._configmap_updated, self._configmap_changed
        )

    def _namespace_updated(self, old: Namespace, new: Namespace) -> None:
        if not terminating(new):
            self.enqueue_update(old, new)

    def _configmap_updated(self, old: ConfigMap, new: ConfigMap) -> None:
        if old.metadata.resource_version != new.metadata.resource_version:
            self._configmap_changed(new)

    def _configmap_changed(self, obj: Any) -> None:
        """A ConfigMap appeared, changed or went: its namespace is synced if it is ours."""
        configmap = unwrap(obj)
        if configmap.metadata.name == CONFIGMAP_NAME:
            self.queue.add(configmap.metadata.namespace or "")

    async def sync_key(self, key: str) -> None:
        namespace = self.namespaces.lister.get(key)
        if namespace is None or terminating(namespace):
            return
        data = {CA_KEY: self.root_ca}
        current = self.configmaps.lister.get(f"{key}/{CONFIGMAP_NAME}")
        if current is None:
            configmap = ConfigMap(
                metadata=ObjectMeta(
                    name=CONFIGMAP_NAME,
                    namespace=key,
                    annotations={DESCRIPTION_ANNOTATION: DESCRIPTION},
                ),
                data=data,
            )
            try:
                await self.ctx.client.create(configmap)
            except ApiError as error:
                # The namespace went away meanwhile, or the cache is behind a create (whose
                # add event will bring the namespace back here).
                if not (error.not_found or error.already_exists):
                    raise
            return
        annotations = current.metadata.annotations or {}
        if current.data == data and annotations.get(DESCRIPTION_ANNOTATION):
            return
        updated = copy.deepcopy(current)
        updated.data = data
        updated.metadata.annotations = {**annotations, DESCRIPTION_ANNOTATION: DESCRIPTION}
        await self.ctx.client.update(updated)


def new(ctx: ControllerContext) -> RootCACertPublisher:
    return RootCACertPublisher(ctx)
