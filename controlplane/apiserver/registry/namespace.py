"""``namespaces/finalize``: the namespace controller removes the ``kubernetes`` finalizer
from ``spec.finalizers`` once a namespace's content is gone, which a whole-object update may
not do."""

from __future__ import annotations

from controlplane.apiserver.registry.store import RequestContext, ResourceStore
from kube.api.kinds.core_v1.cluster import Namespace, NamespaceSpec
from kube.api.meta_v1 import Resource


class FinalizeREST:
    """An Updater taking a Namespace whose ``spec.finalizers`` replace the current ones."""

    body = Namespace.kind_info

    def __init__(self, store: ResourceStore) -> None:
        self.store = store

    async def update(
        self, namespace: str, name: str, obj: Resource, ctx: RequestContext
    ) -> Resource:
        assert isinstance(obj, Namespace)
        requested = obj.spec

        def set_finalizers(current: Resource) -> Resource:
            assert isinstance(current, Namespace)
            if current.spec is not None or requested is not None:
                current.spec = current.spec or NamespaceSpec()
                current.spec.finalizers = requested.finalizers if requested else None
            return current

        return await self.store.mutate("", name, set_finalizers, ctx, "finalize")
