"""The ``scale`` subresource: any kind with replicas, seen as an ``autoscaling/v1 Scale``.

``kubectl scale`` PATCHes ``.../deployments/NAME/scale`` with ``{"spec":{"replicas":N}}`` and
reads the Scale back; autoscalers do the same.  The Scale is computed from the object
(``kube.api.scale``, or a custom resource's scale paths), and a write to it changes only
``spec.replicas`` of the object, guarded by the Scale's resourceVersion when it has one.
"""

from __future__ import annotations

from typing import Any

from controlplane.apiserver import errors
from controlplane.apiserver.crd import customresources
from controlplane.apiserver.registry.rest import Change
from controlplane.apiserver.registry.store import RequestContext, ResourceStore
from kube.api.errors import ROOT, ErrorList
from kube.api.kinds.autoscaling_v1 import Scale
from kube.api.meta_v1 import Resource
from kube.api.scale import scale_of, workload_scale


def to_scale(obj: Resource) -> Scale:
    custom = customresources.scale_fields(obj)
    return scale_of(obj, *custom) if custom is not None else workload_scale(obj)


class ScaleREST:
    """``<kind>/scale``: Getter, Updater and Patcher of the Scale computed from the object.
    Patches apply to the Scale (as upstream's); server-side apply is not served."""

    body = Scale.kind_info
    subresource = "scale"
    applies = False

    def __init__(self, store: ResourceStore) -> None:
        self.store = store

    async def get(self, namespace: str, name: str) -> Scale:
        return to_scale(await self.store.get(namespace, name))

    async def update(self, namespace: str, name: str, obj: Resource, ctx: RequestContext) -> Scale:
        return await self.patch(namespace, name, lambda _: obj, ctx)

    async def patch(self, namespace: str, name: str, change: Change, ctx: RequestContext) -> Scale:
        def write(current: Resource) -> Resource:
            scale = change(to_scale(current))
            assert isinstance(scale, Scale)
            replicas = scale.spec.replicas if scale.spec is not None else None
            problems = ErrorList()
            path = ROOT.child("spec").child("replicas")
            if replicas is None:
                problems.required(path)
            elif replicas < 0:
                problems.invalid(path, replicas, "must be greater than or equal to 0")
            if problems:
                raise errors.invalid(self.store.info, name, problems)
            if not customresources.set_scale_replicas(current, replicas):
                spec: Any = getattr(current, "spec", None)
                spec.replicas = replicas
            current.metadata.resource_version = (
                scale.metadata.resource_version or current.metadata.resource_version
            )
            return current

        return to_scale(await self.store.mutate(namespace, name, write, ctx, self.subresource))
